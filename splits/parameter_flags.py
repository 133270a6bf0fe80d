"""Command-line flags generated from a split method's parameter dataclass, one flag per field.

A field becomes `--field-name` (or the `flag` its metadata names), typed by its annotation:
`int`, `float`, `str`, `bool` (a switch), `X | None` (optional), `tuple[X, X, X]` (three
values) and `tuple[X, ...]` (one or more). A field without a default is a required flag.
`parameter(...)` attaches the help text, choices and old spellings; the dataclass validates
the values in `__post_init__`, so bad values are refused before any long work. A field made
with `setting(...)` is part of the configuration but no flag of its own (e.g. ATG's seed,
which is the `--seed` every method of `splits make` shares).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "add_parameter_arguments",
    "flag_fields",
    "flag_name",
    "parameter",
    "parameter_flags",
    "parameters_from_args",
    "setting",
]

_NO_DEFAULT: Any = dataclasses.MISSING
_SCALARS = (int, float, str)


def parameter(
    default: Any = _NO_DEFAULT,
    *,
    help: str,
    flag: str | None = None,
    choices: Sequence[Any] | None = None,
    metavar: str | tuple[str, ...] | None = None,
    renamed_from: Iterable[str] = (),
) -> Any:
    """A dataclass field of a method's parameters, with what its command-line flag needs."""
    metadata = {
        "help": help,
        "flag": flag,
        "choices": tuple(choices) if choices is not None else None,
        "metavar": metavar,
        "renamed_from": tuple(renamed_from),
    }
    if isinstance(default, list | dict | set):
        raise TypeError("parameter defaults must be immutable (use a tuple)")
    return dataclasses.field(default=default, metadata=metadata)


def setting(default: Any, *, help: str) -> Any:
    """A dataclass field of a method's configuration that is not a command-line flag."""
    if isinstance(default, list | dict | set):
        raise TypeError("setting defaults must be immutable (use a tuple)")
    return dataclasses.field(default=default, metadata={"help": help, "flag": False})


def flag_fields(parameters: type) -> list[dataclasses.Field]:
    """The fields of the dataclass `parameters` that are flags (every field but `setting`s)."""
    return [f for f in dataclasses.fields(parameters) if f.metadata.get("flag") is not False]


def flag_name(field: dataclasses.Field) -> str:
    """The field's long option: its metadata's `flag`, else `--` + the name in kebab-case."""
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def _flag_type(annotation: Any) -> tuple[type, Any]:
    """(value type, nargs) of an annotation; raises TypeError for one this module cannot map."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(options) != 1:
            raise TypeError(f"unsupported parameter type {annotation!r}")
        return _flag_type(options[0])
    if origin is tuple:
        items = typing.get_args(annotation)
        if len(items) == 2 and items[1] is Ellipsis and items[0] in _SCALARS:
            return items[0], "+"
        if items and all(item is items[0] for item in items) and items[0] in _SCALARS:
            return items[0], len(items)
        raise TypeError(f"unsupported parameter type {annotation!r}")
    if annotation is bool or annotation in _SCALARS:
        return annotation, None
    raise TypeError(f"unsupported parameter type {annotation!r}")


def add_parameter_arguments(
    parser: argparse.ArgumentParser, parameters: type, title: str
) -> argparse._ArgumentGroup:
    """One flag per field of the dataclass `parameters`, in an argument group named `title`."""
    hints = typing.get_type_hints(parameters)
    group = parser.add_argument_group(title)
    for field in flag_fields(parameters):
        kind, nargs = _flag_type(hints[field.name])
        required = field.default is _NO_DEFAULT
        text = field.metadata.get("help", "")
        if not required and kind is not bool and field.default is not None:
            shown = " ".join(map(str, field.default)) if nargs else field.default
            text = f"{text} (default {shown})"
        common = {
            "dest": field.name,
            "help": text,
            "renamed_from": field.metadata.get("renamed_from", ()),
        }
        if kind is bool:
            action = argparse.BooleanOptionalAction if field.default else "store_true"
            group.add_argument(flag_name(field), action=action, default=field.default, **common)
            continue
        group.add_argument(
            flag_name(field),
            type=kind,
            nargs=nargs,
            required=required,
            default=None if required else field.default,
            choices=field.metadata.get("choices"),
            metavar=field.metadata.get("metavar"),
            **common,
        )
    return group


def parameters_from_args(parameters: type, args: argparse.Namespace) -> Any:
    """The dataclass `parameters` built (and so validated) from parsed flags."""
    values = {}
    for field in flag_fields(parameters):
        value = getattr(args, field.name)
        values[field.name] = tuple(value) if isinstance(value, list) else value
    return parameters(**values)


def parameter_flags(parameters: type) -> list[str]:
    """Every long option the dataclass `parameters` defines (old spellings excluded)."""
    return [flag_name(field) for field in flag_fields(parameters)]
