"""An augmentation component's JSON params: their checks (`__post_init__`), their names, and its JSON entry.

A component is a frozen dataclass whose `__init__` fields are its params, plus `prob` and, where it needs one,
`sample_rate` (set by `parse_augmentation`, never by the JSON); a field without a default is a required param.
"""

from __future__ import annotations

import dataclasses
import math


def check_number(name: str, value, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, integer: bool = False) -> None:
    """`value` (the param `name`) is a finite number (an integer with `integer`) in [low, high] ((low, high] with
    `low_open`); else ValueError naming it."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)) \
            or not math.isfinite(value):
        raise ValueError(f"`{name}` must be {kind}, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"`{name}` must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"`{name}` must be <= {high}, got {value!r}")


def check_prob(prob) -> None:
    """`prob` is a number in [0, 1]."""
    check_number("prob", prob, low=0.0, high=1.0)


def check_range(lo_name: str, lo, hi_name: str, hi, **bounds) -> None:
    """Both ends of a range pass `check_number` with `bounds`, and `lo` <= `hi`."""
    check_number(lo_name, lo, **bounds)
    check_number(hi_name, hi, **bounds)
    if lo > hi:
        raise ValueError(f"`{lo_name}` ({lo!r}) must not exceed `{hi_name}` ({hi!r})")


def param_names(cls) -> tuple[list[str], list[str]]:
    """(all JSON param names, required ones) of a component class."""
    names, required = [], []
    for f in dataclasses.fields(cls):
        if f.init and f.name not in ("prob", "sample_rate"):
            names.append(f.name)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
    return names, required


def to_entry(component) -> dict:
    """The JSON entry `{"type", "params", "prob"}` that parses back to `component`."""
    names, _ = param_names(type(component))
    params = {k: getattr(component, k) for k in names}
    return {"type": component.type, "params": params, "prob": component.prob}
