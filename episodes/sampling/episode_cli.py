"""Command-line arguments shared by the commands that sample episodes (`python -m
episodes.read`, `python -m beam_pipelines.episodes`): where episodes come from (`--dataset`,
`--split`, FIX-ML's `--lambda`), one flag per sampler option, and the config they give.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from episodes.util.cli_style import add_dataset_argument, finite_float


def _annotation_parser(annotation: str):
    text = str(annotation).replace(" ", "")
    optional = "None" in text.split("|")
    base = [t for t in text.split("|") if t != "None"][0]
    kind = {"int": int, "float": finite_float, "str": str, "bool": bool}.get(base, str)
    return kind, optional


def add_sampler_arguments(parser: argparse.ArgumentParser) -> None:
    """One `--option` per SamplerConfig field (e.g. --mode, --ways, --max-support-size)."""
    from episodes.sampling.sampler_config import SamplerConfig

    group = parser.add_argument_group("sampler (episodes.sampling.sampler.SamplerConfig)")
    for field in dataclasses.fields(SamplerConfig):
        flag = "--" + field.name.replace("_", "-")
        kind, _ = _annotation_parser(field.type)
        default = field.default
        if kind is bool:
            group.add_argument(
                flag,
                dest=f"sampler_{field.name}",
                default=None,
                action=argparse.BooleanOptionalAction,
                help=f"(default {default})",
            )
        else:
            group.add_argument(
                flag,
                dest=f"sampler_{field.name}",
                type=kind,
                default=None,
                metavar=field.name.upper(),
                help=f"(default {default})",
            )


def add_episode_source_arguments(parser: argparse.ArgumentParser) -> None:
    """--dataset DIR (repeatable), --split and the FIX-ML mixing options: where episodes come
    from."""
    add_dataset_argument(
        parser, help="converted dataset folder (repeat --dataset for multi-source episodes)"
    )
    parser.add_argument("--split", required=True, help="train, valid or test")
    add_mixing_arguments(parser)


def add_mixing_arguments(parser: argparse.ArgumentParser) -> None:
    """--lambda / --base-split: FIX-ML's tau_BN(lambda) episodes (novel classes from --split)."""
    parser.add_argument(
        "--lambda",
        dest="mix_lambda",
        type=finite_float,
        default=None,
        metavar="LAMBDA",
        help="mix base and novel classes: each class is novel (from --split) with probability "
        "LAMBDA in [0, 1], else base (from --base-split); FIX-ML section 4.2",
    )
    parser.add_argument(
        "--base-split", default="train", help="base classes for --lambda (default train)"
    )


def sampler_config_from_args(args: argparse.Namespace) -> Any:
    """SamplerConfig from the options given on the command line (others keep defaults); with
    --lambda and no --mode, fixed 5-way 5-shot 15-query episodes as in FIX-ML."""
    from episodes.sampling.sampler_config import SamplerConfig

    values = {
        f.name: getattr(args, f"sampler_{f.name}")
        for f in dataclasses.fields(SamplerConfig)
        if getattr(args, f"sampler_{f.name}", None) is not None
    }
    if getattr(args, "mix_lambda", None) is not None:
        values.setdefault("mode", "fixed")
    return SamplerConfig(**values)


def describe_config(config: Any) -> str:
    """The options of a SamplerConfig that differ from the defaults, as 'name=value' words."""
    changed = [
        f"{f.name}={getattr(config, f.name)!r}"
        for f in dataclasses.fields(config)
        if getattr(config, f.name) != f.default
    ]
    return " ".join(changed) if changed else "defaults (variable ways and shots)"
