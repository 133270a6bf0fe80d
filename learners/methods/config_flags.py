"""Command-line flags generated from the learners' config dataclasses (one generator).

Every field declared with `learners.methods.config_fields.option` becomes `--kebab-case` with the help
text of its metadata; booleans get `--name` and `--no-name`. Flags default to None so that the
values a user gave are told apart from the dataclass defaults (`given_values`).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from learners.methods.config_fields import cli_fields, flag_name


def _value_type(annotation: Any) -> type:
    """int, float, str or bool of an annotation (`float | None` -> float)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(kinds) != 1:
            raise TypeError(f"no flag type for {annotation}")
        annotation = kinds[0]
    if annotation not in (int, float, str, bool):
        raise TypeError(f"no flag type for {annotation}")
    return annotation


def _default_text(field: dataclasses.Field) -> str:
    if field.default is dataclasses.MISSING or field.default is None:
        return ""
    return f" (default {field.default})"


def add_config_flags(
    group: argparse._ActionsContainer,
    config_class: type,
    *,
    only: Callable[[dataclasses.Field], bool] = lambda field: True,
    taken: set[str] | None = None,
    show_defaults: bool = True,
) -> list[str]:
    """Add a flag for each settable field of `config_class` (those `only` keeps) to `group`;
    fields whose flag is in `taken` (added by another dataclass) are skipped; `show_defaults`
    appends the dataclass default to the help. Returns the field names added."""
    hints = typing.get_type_hints(config_class)
    added = []
    for field in cli_fields(config_class):
        flag = flag_name(field.name)
        if not only(field) or (taken is not None and flag in taken):
            continue
        kind = _value_type(hints[field.name])
        text = field.metadata.get("help", "") + (_default_text(field) if show_defaults else "")
        if kind is bool:
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            choices = field.metadata.get("choices")
            group.add_argument(flag, type=kind, default=None, choices=choices, help=text)
        if taken is not None:
            taken.add(flag)
        added.append(field.name)
    return added


def given_values(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The generated flags among `names` that the user gave (not None), by field name."""
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
