"""Reading a config dataclass back from its JSON dict: one rule for all of them (STYLE §3, unknown keys are an
error, never ignored). Imports nothing of the package, so every config module may use it."""

from __future__ import annotations

import dataclasses
from typing import TypeVar

T = TypeVar("T")


def from_dict(cls: type[T], values: dict) -> T:
    """`cls(**values)` for a dataclass `cls`, the inverse of `dataclasses.asdict` for flat fields.

    Args:
        cls: the dataclass (its `__post_init__` checks the values).
        values: field name -> value, e.g. read from a config JSON file.

    Raises:
        ValueError: a key of `values` is not a field of `cls` (a typo, or a file from another version).
    """
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} keys {unknown}; valid keys are {sorted(names)}")
    return cls(**values)
