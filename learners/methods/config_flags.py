"""Command-line flags of the learners' config dataclasses, made by the toolkit's one layer.

Every field declared with `learners.methods.config_fields.option` becomes `--kebab-case` with the
help text of its metadata (`episodes.util.config_flags.add_config_arguments`); booleans get
`--name` and `--no-name`. Flags default to None so that the values a user gave are told apart
from the dataclass defaults (`given_values`), also where a --recipe fills defaults in.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from episodes.util.config_flags import add_config_arguments, flag_fields, flag_of

__all__ = ["add_config_flags", "given_values"]


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
    chosen = [
        field
        for field in flag_fields(config_class)
        if only(field) and (taken is None or flag_of(field) not in taken)
    ]
    add_config_arguments(
        group, config_class, fields=chosen, show_defaults=show_defaults, always_negatable=True
    )
    group.set_defaults(**{field.name: None for field in chosen})
    if taken is not None:
        taken.update(flag_of(field) for field in chosen)
    return [field.name for field in chosen]


def given_values(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The generated flags among `names` that the user gave (not None), by field name."""
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
