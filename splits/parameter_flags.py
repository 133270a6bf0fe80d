"""Moved: a split method's parameters are an `episodes.util.config_flags` config (one layer from
config dataclasses to flags for the sampler, the sources and the split methods).

Until version 0.3.0 the old names import from here with a DeprecationWarning naming the new
one: `parameter` is `config_field`, `setting(default, help=...)` is `config_field(default,
help=..., cli=False)`, `parameters_from_args` is `config_from_args`, `flag_fields` and
`flag_name` (now `flag_of`) are the layer's, `add_parameter_arguments(parser, cls, title)` is
`add_config_arguments(parser.add_argument_group(title), cls)`.
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

from episodes.util import config_flags
from episodes.util.moved_modules import moved_note

__all__ = []  # only old names, each with a warning


def _setting(default: Any, *, help: str) -> Any:
    return config_flags.config_field(default, help=help, cli=False)


def _add_parameter_arguments(
    parser: argparse.ArgumentParser, parameters: type, title: str
) -> argparse._ArgumentGroup:
    group = parser.add_argument_group(title)
    config_flags.add_config_arguments(group, parameters)
    return group


def _parameter_flags(parameters: type) -> list[str]:
    return [config_flags.flag_of(f) for f in config_flags.flag_fields(parameters)]


_NEW = "episodes.util.config_flags"
_OLD_NAMES: dict[str, tuple[str, Any]] = {
    "parameter": (f"{_NEW}.config_field", config_flags.config_field),
    "setting": (f"{_NEW}.config_field (cli=False)", _setting),
    "parameters_from_args": (f"{_NEW}.config_from_args", config_flags.config_from_args),
    "flag_fields": (f"{_NEW}.flag_fields", config_flags.flag_fields),
    "flag_name": (f"{_NEW}.flag_of", config_flags.flag_of),
    "add_parameter_arguments": (f"{_NEW}.add_config_arguments", _add_parameter_arguments),
    "parameter_flags": (f"{_NEW}.flag_of of each flag_fields", _parameter_flags),
}


def __getattr__(name: str) -> Any:
    if name not in _OLD_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new, value = _OLD_NAMES[name]
    warnings.warn(moved_note(f"{__name__}.{name}", new), DeprecationWarning, stacklevel=2)
    return value
