"""One layer from a typed config dataclass to command-line flags, their checks and their help.

A config is a dataclass; each field that is an option is made with `config_field(...)`, which
declares beside the field what scikit-learn keeps in `_parameter_constraints`: its help, its
flag (by default `--` and the field name in kebab-case), its old spellings, and its constraint
(choices, inclusive `minimum` / `maximum`, exclusive `above` / `below`). The field's annotation
says its type: `int`, `float`, `str`, `bool` (a switch), `X | None` (unset allowed), `tuple[X,
X, X]` (that many values) or `tuple[X, ...]` (one or more). A field without a default is a
required flag; `cli=False` makes a setting the command fills in itself, no flag.

- `check_fields(config)`, called by a config's `__post_init__`, refuses a value off its type or
  constraint in one line naming the flag, the value and what was expected
  (`--jpeg-quality 101: expected an integer in 1..100`), before any work starts.
- `add_config_arguments(container, Config)` adds the flags to a parser or argument group (of an
  `episodes.util.cli_style` parser: old spellings are kept with a note).
- `config_from_args(Config, args)` builds the config from the flags given (the others keep the
  dataclass defaults), and so checks it.

Used by the sampler's options (`episodes.sampling.sampler_config`), the sampling modes'
options, the sources' configs (`beam_pipelines.sources._lib.source_config`) and the split methods'
parameters (`splits.methods.*`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from episodes.util.cli_errors import UsageError
from episodes.util.cli_style import finite_float

__all__ = [
    "ConfigError",
    "FieldKind",
    "add_config_arguments",
    "check_fields",
    "check_value",
    "config_field",
    "config_from_args",
    "expected_text",
    "field_kinds",
    "flag_fields",
    "flag_of",
    "given_values",
]


class ConfigError(UsageError):
    """A config field (a flag) holds a value it cannot take; the message names flag and value."""


def config_field(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    flag: str | None = None,
    choices: Iterable[Any] | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    below: float | None = None,
    metavar: str | tuple[str, ...] | None = None,
    renamed_from: Iterable[str] = (),
    cli: bool = True,
    metadata: Mapping[str, Any] | None = None,
) -> Any:
    """A config field and its flag: `help`, `flag` (default `--field-name`), allowed `choices`,
    bounds (`minimum` / `maximum` inclusive, `above` / `below` exclusive), `metavar`, the old
    spellings `renamed_from`; `cli=False` for a setting that is no flag. `metadata` adds keys of
    the caller's own (e.g. which options a command may change later). A list default becomes a
    fresh list per instance; prefer a tuple."""
    meta = {
        "help": help,
        "flag": flag,
        "choices": tuple(choices) if choices is not None else None,
        "minimum": minimum,
        "maximum": maximum,
        "above": above,
        "below": below,
        "metavar": metavar,
        "renamed_from": tuple(renamed_from),
        "cli": cli,
        **(metadata or {}),
    }
    if isinstance(default, dict | set):
        raise TypeError("config defaults must be immutable (use a tuple)")
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def flag_of(field: dataclasses.Field | str) -> str:
    """The long option of a field (or of a field name): its declared `flag`, else `--` and the
    name in kebab-case."""
    if isinstance(field, str):
        return "--" + field.replace("_", "-")
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def flag_fields(config_class: type) -> list[dataclasses.Field]:
    """The fields of `config_class` that are flags (those made with `cli=False` excluded)."""
    return [f for f in dataclasses.fields(config_class) if f.metadata.get("cli", True)]


@dataclasses.dataclass(frozen=True)
class FieldKind:
    """What a field's annotation says: the element type, whether None is allowed, and how many
    values it holds (None: one; an int: a tuple of that length; "+": a tuple of one or more)."""

    base: type
    optional: bool
    count: int | str | None = None


_SCALARS = (int, float, str, bool)


def _kind(annotation: Any) -> FieldKind:
    optional = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(f"no flag type for {annotation!r}")
        optional, annotation = True, members[0]
    if typing.get_origin(annotation) is tuple:
        items = typing.get_args(annotation)
        if len(items) == 2 and items[1] is Ellipsis and items[0] in _SCALARS:
            return FieldKind(items[0], optional, "+")
        if items and all(item is items[0] for item in items) and items[0] in _SCALARS:
            return FieldKind(items[0], optional, len(items))
        raise TypeError(f"no flag type for {annotation!r}")
    if annotation in _SCALARS:
        return FieldKind(annotation, optional)
    raise TypeError(f"no flag type for {annotation!r}")


@functools.cache
def field_kinds(config_class: type) -> dict[str, FieldKind]:
    """The kind of every field of `config_class`, from its annotations (TypeError for a flag
    of a type no flag can hold, e.g. a dict; a `cli=False` setting of such a type is left
    unchecked); read once per class. Do not change the dict returned."""
    hints = typing.get_type_hints(config_class)
    kinds = {}
    for field in dataclasses.fields(config_class):
        try:
            kinds[field.name] = _kind(hints[field.name])
        except TypeError:
            if field.metadata.get("cli", True):
                raise
            kinds[field.name] = FieldKind(object, True)  # a setting of another type: unchecked
    return kinds


_NOUNS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def expected_text(kind: FieldKind, meta: Mapping[str, Any]) -> str:
    """What a field takes, in words: 'an integer in 1..100', 'one of jpeg, png', '3 numbers'."""
    text = _NOUNS[kind.base]
    if kind.count == "+":
        text = "one or more numbers" if kind.base in (int, float) else "one or more values"
    elif kind.count is not None:
        text = f"{kind.count} numbers" if kind.base is float else f"{kind.count} values"
    if meta.get("choices"):
        text = "one of " + ", ".join(str(c) for c in meta["choices"])
    low, high = meta.get("minimum"), meta.get("maximum")
    above, below = meta.get("above"), meta.get("below")
    lower = ("[", low) if low is not None else ("(", above) if above is not None else None
    upper = ("]", high) if high is not None else (")", below) if below is not None else None
    if lower and upper and (lower[0], upper[0]) == ("[", "]"):
        text += f" in {low:g}..{high:g}"
    elif lower and upper:
        text += f" in {lower[0]}{lower[1]:g}, {upper[1]:g}{upper[0]}"
    elif lower:
        text += f" {'>=' if lower[0] == '[' else '>'} {lower[1]:g}"
    elif upper:
        text += f" {'<=' if upper[0] == ']' else '<'} {upper[1]:g}"
    return text


def _shown(value: Any) -> str:
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return str(value)


def _is_of(value: Any, base: type) -> bool:
    if base is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if base is float:
        return isinstance(value, int | float)
    return isinstance(value, base)


def _allowed(item: Any, meta: Mapping[str, Any]) -> bool:
    if isinstance(item, float) and not math.isfinite(item):
        return False
    if meta.get("choices") and item not in meta["choices"]:
        return False
    low, high = meta.get("minimum"), meta.get("maximum")
    above, below = meta.get("above"), meta.get("below")
    return not (
        (low is not None and item < low)
        or (high is not None and item > high)
        or (above is not None and not item > above)
        or (below is not None and not item < below)
    )


def check_value(field: dataclasses.Field, kind: FieldKind, value: Any, error: type) -> Any:
    """`value` as the field stores it (a list of a tuple field becomes a tuple, an integer of
    a float field a float), or `error` naming the flag, the value and what was expected."""
    if kind.base is object or (value is None and (kind.optional or field.default is None)):
        return value
    meta = field.metadata

    def refuse() -> Exception:
        items = value if isinstance(value, list | tuple) else (value,)
        if any(isinstance(v, float) and not math.isfinite(v) for v in items):
            return error(f"{flag_of(field)} {_shown(value)}: expected a finite number")
        return error(f"{flag_of(field)} {_shown(value)}: expected {expected_text(kind, meta)}")

    many = kind.count is not None
    if many:
        if not isinstance(value, list | tuple):
            raise refuse()
        if (kind.count == "+" and not value) or (kind.count != "+" and len(value) != kind.count):
            raise refuse()
    for item in value if many else (value,):
        if not _is_of(item, kind.base) or not _allowed(item, meta):
            raise refuse()
    if many:
        return tuple(float(v) if kind.base is float else v for v in value)
    return float(value) if kind.base is float else value


def check_fields(config: Any, error: type[Exception] = ConfigError) -> None:
    """Check every field of the dataclass `config` against its annotation and constraint
    (`error` names the first bad one's flag and value) and store each value in its type (a
    tuple field's list as a tuple, a float field's integer as a float); frozen configs too."""
    kinds = field_kinds(type(config))
    for field in dataclasses.fields(config):
        value = check_value(field, kinds[field.name], getattr(config, field.name), error)
        object.__setattr__(config, field.name, value)


_METAVARS = {int: "N", float: "X"}
_TYPES: dict[type, Callable[[str], Any]] = {int: int, float: finite_float, str: str}


def _help_text(field: dataclasses.Field, kind: FieldKind, show_default: bool) -> str:
    text = field.metadata.get("help", "")
    default = field.default
    if not show_default or default in (dataclasses.MISSING, None) or kind.base is bool:
        return text
    if "default" in text:  # the help says it already (e.g. where the default comes from)
        return text
    return f"{text} (default {_shown(default)})"


def add_config_arguments(
    container: argparse._ActionsContainer,
    config_class: type,
    *,
    fields: Iterable[dataclasses.Field] | None = None,
    dest_prefix: str = "",
    require_missing: bool = True,
    show_defaults: bool = True,
    underscore_spellings: bool = False,
    always_negatable: bool = False,
) -> list[dataclasses.Field]:
    """One flag per flag field of `config_class` (or of `fields`), added to `container` (a
    parser or argument group of an `episodes.util.cli_style` parser). A flag given is stored as
    `dest_prefix + field name`; a flag not given leaves no attribute, so the dataclass default
    applies (`config_from_args`). A field without a default is a required flag unless
    `require_missing` is False (options asked for only in some uses, e.g. a sampling mode's). A
    bool field is `--flag`, and `--no-flag` too when its default is True (or always, with
    `always_negatable`). `underscore_spellings` keeps `--field_name` as an old spelling.
    `show_defaults` appends '(default X)' to a help that does not name its default. Returns the
    fields added."""
    kinds = field_kinds(config_class)
    chosen = flag_fields(config_class) if fields is None else list(fields)
    for field in chosen:
        kind, meta, flag = kinds[field.name], field.metadata, flag_of(field)
        old = list(meta.get("renamed_from", ()))
        if underscore_spellings and "_" in field.name:
            old.append("--" + field.name)
        common = {
            "dest": dest_prefix + field.name,
            "default": argparse.SUPPRESS,
            "help": _help_text(field, kind, show_defaults),
        }
        if kind.base is bool:
            container.add_argument(
                flag, action="store_const", const=True, renamed_from=old, **common
            )
            if field.default is True or always_negatable:
                negated = [f"--no-{o[2:]}" for o in old]
                container.add_argument(
                    "--no-" + flag[2:],
                    action="store_const",
                    const=False,
                    dest=common["dest"],
                    default=argparse.SUPPRESS,
                    help=f"turn {flag} off",
                    renamed_from=negated,
                )
            continue
        required = require_missing and field.default is dataclasses.MISSING
        if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            required = False
        container.add_argument(
            flag,
            type=_TYPES[kind.base],
            nargs=kind.count,
            choices=meta.get("choices"),
            metavar=meta.get("metavar")
            or (None if meta.get("choices") else _METAVARS.get(kind.base, field.name.upper())),
            required=required,
            renamed_from=old,
            **common,
        )
    return chosen


def given_values(
    config_class: type,
    args: argparse.Namespace,
    *,
    dest_prefix: str = "",
    fields: Iterable[dataclasses.Field] | None = None,
) -> dict[str, Any]:
    """The flag fields of `config_class` (or `fields`) that `args` holds, by field name (lists
    of several values as tuples)."""
    values = {}
    for field in flag_fields(config_class) if fields is None else fields:
        value = getattr(args, dest_prefix + field.name, None)
        if value is not None:
            values[field.name] = tuple(value) if isinstance(value, list) else value
    return values


def config_from_args(
    config_class: type, args: argparse.Namespace, *, dest_prefix: str = "", **values: Any
) -> Any:
    """The config of the flags given in `args` (others keep their defaults) and `values` (set
    by the command), built and so checked."""
    return config_class(**{**given_values(config_class, args, dest_prefix=dest_prefix), **values})
