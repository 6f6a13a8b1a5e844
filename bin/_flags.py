"""Configs from flags, by field name: a flag meant for a config takes its default from the config's field, and the
config is built back from the flags named after its fields.

    flags.DEFINE_integer("epochs", default(TrainConfig, "epochs"), "Epochs.")
    ...
    config = from_flags(TrainConfig, pipeline=from_flags(PipelineConfig), model=model)

`default` fails at import, naming the config and the field, when the config has no such field: a flag meant for a
field that doesn't exist, or left behind by a renamed one, stops every run of the command (its --help too, which
tests/test_cli.py runs for every command) instead of being silently ignored. `from_flags` fails the same way on a
value given for a field the config doesn't have, and on a flag whose name is a field holding a config of its own
(`TrainConfig.model` and --model): such a field is built by the command and given.
"""

from __future__ import annotations

import dataclasses
import typing

from absl import flags


def _fields(config) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(config)}


def _holds_config(config, name: str) -> bool:
    """Whether `config`'s field `name` holds a config of its own (a dataclass, or None or one)."""
    try:
        hint = typing.get_type_hints(config)[name]
    except Exception:  # an annotation this module can't evaluate: judge by the default
        return dataclasses.is_dataclass(default(config, name))
    return any(dataclasses.is_dataclass(t) for t in (hint, *typing.get_args(hint)))


def default(config, field: str):
    """The default of `config`'s field `field`, as an absl flag takes it (a tuple as a list); None when the field
    has none (a required flag).

    Raises:
        AttributeError: `config` has no field `field`.
    """
    found = _fields(config).get(field)
    if found is None:
        raise AttributeError(f"{config.__name__} has no field `{field}` to define a flag for; its fields: "
                             f"{', '.join(_fields(config))}")
    if found.default is not dataclasses.MISSING:
        value = found.default
    elif found.default_factory is not dataclasses.MISSING:
        value = found.default_factory()
    else:
        return None
    return list(value) if isinstance(value, tuple) else value


def from_flags(config, prefix: str = "", values: flags.FlagValues = flags.FLAGS, **given):
    """`config` built from `given` and, for its other fields, the flags named `prefix` + field (a list as a
    tuple); a field without a flag keeps its default.

    Raises:
        TypeError: `given` names a field `config` doesn't have, or a field holding a config of its own has a
            flag of the same name and no value in `given`.
        ValueError: the config's own checks (`__post_init__`).
    """
    fields = _fields(config)
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise TypeError(f"{config.__name__} has no field {', '.join(f'`{n}`' for n in unknown)}; its fields: "
                        f"{', '.join(fields)}")
    kwargs = dict(given)
    for name, field in fields.items():
        flag = prefix + name
        if name in given or flag not in values:
            continue
        if _holds_config(config, name):
            raise TypeError(f"{config.__name__}.{name} is a config of its own: build it and give it "
                            f"(`{name}=...`); the flag --{flag} is not it")
        value = values[flag].value
        kwargs[name] = tuple(value) if isinstance(value, list) else value
    return config(**kwargs)
