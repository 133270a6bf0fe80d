"""The flags `convert` and `convert --all` share: what to convert and where, the image options
every source takes, Beam's runner flags, and the sources' own options from their typed configs
(`beam_pipelines.sources._lib.source_config`), each flag declared once."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from beam_pipelines.runners.options import add_runner_arguments
from beam_pipelines.sources._lib.source_config import (
    SourceConfig,
    add_config_arguments,
    declared_in,
    flag_of,
)
from beam_pipelines.sources.base import Source
from episodes.util.cli_style import CommandParser, command_parser

__all__ = ["add_source_arguments", "conversion_parser"]


def conversion_parser(prog: str, description: str) -> CommandParser:
    """The shared flags; `prog` is the command after `python -m`."""
    parser = command_parser(prog, description)
    parser.add_argument("--source", help="source name (see --list-sources), or tfds:NAME")
    parser.add_argument("--list-sources", action="store_true", help="list sources and exit")
    parser.add_argument(
        "--all",
        action="store_true",
        help="convert every source found under --input (one sub-folder per source; see --list-sources)",
    )
    parser.add_argument("--input", help="raw dataset folder (or archive folder)")
    parser.add_argument("--output", help="output dataset folder")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing output folder"
    )
    add_config_arguments(parser.add_argument_group(SourceConfig.title), SourceConfig)
    add_runner_arguments(parser)
    return parser


def add_source_arguments(parser: CommandParser, sources: Sequence[type[Source]]) -> None:
    """The flags of the sources' configs beyond the image options, one group per config class
    that declares them (shared groups name their sources). A flag is added once however many
    sources take it; two config classes declaring the same flag is an error, never resolved."""
    owners: dict[type, list[dataclasses.Field]] = {}
    users: dict[type, list[str]] = {}
    declared: dict[str, type] = {}
    for source in sources:
        config = source.config_class
        for f in config.flag_fields():
            owner = declared_in(config, f.name)
            if owner is SourceConfig:
                continue
            if declared.setdefault(f.name, owner) is not owner:
                raise ValueError(
                    f"{flag_of(f)} is declared by both {declared[f.name].__name__} and "
                    f"{owner.__name__}: give one of them another name"
                )
            if f.name not in {g.name for g in owners.setdefault(owner, [])}:
                owners[owner].append(f)
            if source.name not in users.setdefault(owner, []):
                users[owner].append(source.name)
    for owner, fields in owners.items():
        shared = "title" in vars(owner)
        title = owner.title if shared else f"{users[owner][0]} options"
        if shared and len(sources) > 1:
            title += f" ({', '.join(users[owner])})"
        add_config_arguments(parser.add_argument_group(title), owner, fields)
