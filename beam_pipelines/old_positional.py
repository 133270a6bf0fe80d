"""The old positional dataset folder of `verify OUT` / `cache OUT`, still accepted for one
release as `--dataset OUT` with a one-line note (the one CLI style, episodes.util.cli_style)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from episodes.util.cli_style import OLD_SPELLINGS_UNTIL, single_dataset

__all__ = ["parse_with_one_dataset", "positional_as_flag"]


def positional_as_flag(
    parser: argparse.ArgumentParser, argv: Sequence[str], flag: str = "--dataset"
) -> list[str]:
    """`argv` with its first positional (not the value of a flag) given as `flag POSITIONAL`,
    and a note saying so. A flag the parser does not know (a Beam runner flag) is taken to carry
    a value unless written `--name=value` or followed by another flag."""
    args = list(argv)
    position = 0
    while position < len(args):
        arg = args[position]
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-":
            print(
                f"note: the positional folder {arg} is now {flag} {arg}; the old form goes in "
                f"{OLD_SPELLINGS_UNTIL}",
                file=sys.stderr,
            )
            return args[:position] + [flag, arg] + args[position + 1 :]
        name, eq, _ = arg.partition("=")
        action = parser._option_string_actions.get(name)
        known_flag_without_value = action is not None and action.nargs == 0
        next_is_flag = position + 1 < len(args) and args[position + 1].startswith("-")
        position += 1 if (eq or known_flag_without_value or next_is_flag) else 2
    return args


def parse_with_one_dataset(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, purpose: str
) -> tuple[argparse.Namespace, list[str], str]:
    """`parse_known_args` of `argv` (default: the command line) with the old positional folder
    taken as `--dataset`, and the one `--dataset` given; a missing or repeated one is a usage
    error naming `purpose` (what the folder is for)."""
    given = sys.argv[1:] if argv is None else argv
    args, beam_args = parser.parse_known_args(positional_as_flag(parser, given))
    try:
        dataset = single_dataset(args.dataset)
    except ValueError as exc:
        parser.error(str(exc))
    if dataset is None:
        parser.error(f"missing --dataset DIR (the converted dataset folder to {purpose})")
    return args, beam_args, dataset
