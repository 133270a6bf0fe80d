"""Command-line arguments shared by the commands that sample episodes (`python -m
episodes.read`, `python -m beam_pipelines.episodes`): where episodes come from (`--dataset`,
`--split`, the sampling mode and its options, e.g. FIX-ML's `--lambda`), one flag per sampler
option, and the config and mode they give.

Every registered sampling mode's options are flags (`episodes.sampling.modes`); the mode used is
`--sampling NAME`, else the one whose options are given, else Meta-Dataset's.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from episodes.sampling.sampler_config import SamplerError
from episodes.sampling.sampling_mode import SamplingMode
from episodes.util.cli_style import add_dataset_argument
from episodes.util.config_flags import add_config_arguments, flag_of, given_values
from episodes.util.moved_modules import moved_names

__all__ = [
    "SAMPLER_DEST",
    "add_episode_source_arguments",
    "add_sampler_arguments",
    "add_sampling_mode_arguments",
    "describe_config",
    "sampler_config_from_args",
    "sampling_mode_from_args",
]

SAMPLER_DEST = "sampler_"  # the sampler's flags are stored as sampler_<field> in the namespace

__getattr__ = moved_names(
    __name__, {"add_mixing_arguments": f"{__name__}:add_sampling_mode_arguments"}
)


def add_sampler_arguments(parser: argparse.ArgumentParser) -> None:
    """One `--option` per SamplerConfig field (e.g. --mode, --ways, --max-support-size), with
    the help, choices and bounds declared beside the field (`episodes.util.config_flags`)."""
    from episodes.sampling.sampler_config import SamplerConfig

    group = parser.add_argument_group(
        "sampler (episodes.sampling.sampler.SamplerConfig; the defaults are Meta-Dataset's)"
    )
    add_config_arguments(group, SamplerConfig, dest_prefix=SAMPLER_DEST)


def add_episode_source_arguments(parser: argparse.ArgumentParser) -> None:
    """--dataset DIR (repeatable), --split and the sampling mode's flags: where episodes come
    from."""
    add_dataset_argument(
        parser, help="converted dataset folder (repeat --dataset for multi-source episodes)"
    )
    parser.add_argument("--split", required=True, help="train, valid or test")
    add_sampling_mode_arguments(parser)


def _mode_dest(mode: str) -> str:
    return f"sampling_{mode}_"


def add_sampling_mode_arguments(parser: argparse.ArgumentParser) -> None:
    """`--sampling NAME` and every registered mode's options, a group per mode (e.g. FIX-ML's
    --lambda / --base-split: tau_BN(lambda) episodes, novel classes from --split)."""
    from episodes.sampling.modes import DEFAULT_MODE, mode_class, mode_names

    names = mode_names()
    parser.add_argument(
        "--sampling",
        choices=names,
        default=None,
        help=f"how episodes are drawn (default {DEFAULT_MODE}, or the mode whose options are "
        "given)",
    )
    for name in names:
        mode = mode_class(name)
        fields = dataclasses.fields(mode.Options)
        if not fields:
            continue
        group = parser.add_argument_group(f"sampling mode {name}", mode.summary)
        # asked for only with the mode: a field without a default is checked when it is chosen
        add_config_arguments(
            group, mode.Options, dest_prefix=_mode_dest(name), require_missing=False
        )


def sampling_mode_from_args(args: argparse.Namespace) -> SamplingMode:
    """The sampling mode the command line asks for (module docstring); SamplerError names the
    flags that do not fit together."""
    from episodes.sampling.modes import DEFAULT_MODE, get_mode, mode_class, mode_names

    given: dict[str, dict[str, Any]] = {}
    flags: dict[str, list[str]] = {}
    for name in mode_names():
        options = mode_class(name).Options
        values = given_values(options, args, dest_prefix=_mode_dest(name))
        if values:
            given[name] = values
            flags[name] = [flag_of(f) for f in dataclasses.fields(options) if f.name in values]
    asked = getattr(args, "sampling", None)
    described = {n: f"{' '.join(flags[n])} (sampling mode {n})" for n in given}
    if asked is None and len(given) > 1:
        raise SamplerError(
            f"{' and '.join(described.values())}: options of different sampling modes; give "
            "the options of one"
        )
    chosen = asked or next(iter(given), DEFAULT_MODE)
    others = [text for n, text in described.items() if n != chosen]
    if others:
        raise SamplerError(f"{' and '.join(others)} cannot be used with --sampling {chosen}")
    missing = [
        flag_of(f)
        for f in dataclasses.fields(mode_class(chosen).Options)
        if f.default is dataclasses.MISSING and f.name not in given.get(chosen, {})
    ]
    if missing:
        with_what = " ".join(flags.get(chosen, [])) or f"--sampling {chosen}"
        raise SamplerError(f"{with_what} needs {' '.join(missing)} (sampling mode {chosen})")
    return get_mode(chosen, **given.get(chosen, {}))


def sampler_config_from_args(args: argparse.Namespace) -> Any:
    """SamplerConfig from the options given on the command line (others keep defaults, or the
    sampling mode's: with --lambda and no --mode, fixed 5-way 5-shot 15-query episodes as in
    FIX-ML)."""
    from episodes.sampling.sampler_config import SamplerConfig

    values = given_values(SamplerConfig, args, dest_prefix=SAMPLER_DEST)
    for name, value in sampling_mode_from_args(args).config_defaults().items():
        values.setdefault(name, value)
    return SamplerConfig(**values)


def describe_config(config: Any) -> str:
    """The options of a SamplerConfig that differ from the defaults, as 'name=value' words."""
    changed = [
        f"{f.name}={getattr(config, f.name)!r}"
        for f in dataclasses.fields(config)
        if getattr(config, f.name) != f.default
    ]
    return " ".join(changed) if changed else "defaults (variable ways and shots)"
