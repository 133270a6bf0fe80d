"""Meta-Dataset's episode sampler options as flags of learners.train and learners.evaluate.

`episodes.sampling.sampler_config.SamplerConfig` declares each option once (help, bounds,
choices; `episodes.util.config_flags`); here they become an argument group of the learners'
commands, so a run can train and be evaluated on the episodes any sampling command draws (e.g.
`--max-ways 20`, `--no-use-dag-hierarchy`, `--ignore-hierarchy-probability 0.1`). `--ways`,
`--shots` and `--query` stay the learners' own flags (a run records them in its episode
options); `mode` follows from them (fixed when ways and shots are given).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from typing import Any

from episodes.sampling.sampler_config import SamplerConfig
from episodes.util.config_flags import add_config_arguments, flag_fields, flag_of, given_values

__all__ = [
    "OWN_FIELDS",
    "SAMPLER_FIELDS",
    "add_sampler_arguments",
    "sampler_config",
    "sampler_flags_given",
    "sampler_options_from_args",
]

OWN_FIELDS = ("mode", "ways", "shots", "query")  # the learners' own flags decide these
SAMPLER_FIELDS: tuple[dataclasses.Field, ...] = tuple(
    field for field in flag_fields(SamplerConfig) if field.name not in OWN_FIELDS
)
_DEST = "sampler_"  # args.sampler_max_ways, ...: no clash with the commands' own names


def add_sampler_arguments(parser: argparse.ArgumentParser, purpose: str) -> None:
    """The sampler's options (all but ways, shots, query and mode) as one argument group."""
    group = parser.add_argument_group("episode sampler (Meta-Dataset's options)", purpose)
    add_config_arguments(group, SamplerConfig, fields=SAMPLER_FIELDS, dest_prefix=_DEST)


def sampler_options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The sampler options given on the command line, by SamplerConfig field name."""
    return given_values(SamplerConfig, args, dest_prefix=_DEST, fields=SAMPLER_FIELDS)


def sampler_flags_given(args: argparse.Namespace) -> list[str]:
    """The flags of the sampler options given (for refusals that name them)."""
    given = sampler_options_from_args(args)
    return [flag_of(field) for field in SAMPLER_FIELDS if field.name in given]


def sampler_config(
    ways: int | None, shots: int | None, query: int | None, options: Mapping[str, Any]
) -> SamplerConfig:
    """The sampler's config of an episode shape and the options given: Meta-Dataset's variable
    episodes when no shape is given; classes uniform over the split (no class hierarchy) when
    the ways are fixed, as Meta-Dataset's fixed-ways setups set ignore_dag_ontology and
    ignore_bilevel_ontology, unless the options say otherwise. Checked on construction: a value
    off its bounds is one line naming its flag (SamplerError)."""
    if ways is None and shots is None and query is None:
        return SamplerConfig(**options)
    flat = ways is not None
    shape = {
        "mode": "fixed" if ways is not None and shots is not None else "variable",
        "ways": ways,
        "shots": shots,
        "query": query,
        "use_dag_hierarchy": not flat,
        "use_bilevel_hierarchy": not flat,
    }
    return SamplerConfig(**{**shape, **options})
