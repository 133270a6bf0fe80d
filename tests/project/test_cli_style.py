"""One CLI style for every `python -m` command (issue 11): the test walks every command's parser.

Rules: long flags in kebab-case (Beam's own pipeline flags excepted); what a command writes is
`--output` (never `--out`, `--out-dir`, `--output-dir`); a converted dataset is `--dataset DIR`,
repeatable, never a positional; old spellings still parse, with a one-line note.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from episodes.util.cli_style import command_parser
from tests.fixtures.command_walk import NOT_COMMANDS, command_module, command_parsers, commands

BEAM_FLAGS = {"--direct_num_workers"}  # Beam's PipelineOptions spelling, passed through to Beam
KEBAB = re.compile(r"^--[a-z0-9]+(-[a-z0-9]+)*$")
OUTPUT_SPELLINGS = {"--out", "--out-dir", "--output-dir", "--outdir", "--output-file"}
FOLDER_POSITIONALS = {"dataset", "datasets", "dataset_dir", "out", "output", "root", "spec"}


def violations(name: str, parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        if not action.option_strings:
            if action.dest in FOLDER_POSITIONALS:
                yield f"{name}: positional {action.dest} (use --dataset DIR / --output)"
            continue
        for option in action.option_strings:
            if not option.startswith("--") or option in BEAM_FLAGS:
                continue
            if not KEBAB.match(option):
                yield f"{name}: {option} is not kebab-case"
            if option in OUTPUT_SPELLINGS:
                yield f"{name}: {option} (what a command writes is --output)"
            if option == "--dataset" and (
                not isinstance(action, argparse._AppendAction) or action.metavar != "DIR"
            ):
                yield f"{name}: --dataset is not a repeatable folder (--dataset DIR)"


def all_violations() -> set[str]:
    found = set()
    for module_name in commands():
        module = command_module(module_name)
        if getattr(module, "build_parser", None) is None:
            found.add(f"{module_name}: no build_parser() to walk")
            continue
        for name, parser in command_parsers(module_name):
            found.update(violations(name, parser))
    return found


def test_every_command_follows_the_one_style():
    found = sorted(all_violations())
    assert not found, "commands off the one style:\n" + "\n".join(found)


def test_the_walk_finds_the_commands():
    found = commands()
    for expected in ("beam_pipelines.convert", "episodes.read", "learners.train", "splits.atg"):
        assert expected in found
    assert not set(found) & NOT_COMMANDS


def test_old_spellings_still_parse_with_one_note_each(capsys):
    parser = command_parser("demo")
    parser.add_argument("--output", required=True, renamed_from=("--out",))
    group = parser.add_argument_group("images")
    group.add_argument("--jpeg-quality", type=int, default=95, renamed_from=("--jpeg_quality",))
    sub = parser.add_subparsers(dest="command", required=True)
    pool = sub.add_parser("pool")
    pool.add_argument("--k-shots", type=int, renamed_from=("--k",))
    args = parser.parse_args(["--out", "A", "--jpeg_quality=80", "pool", "--k", "5"])
    assert (args.output, args.jpeg_quality, args.command, args.k_shots) == ("A", 80, "pool", 5)
    notes = capsys.readouterr().err.splitlines()
    assert notes == [
        f"note: {old} is now {new}; the old spelling goes in version 0.3.0"
        for old, new in (
            ("--out", "--output"),
            ("--jpeg_quality", "--jpeg-quality"),
            ("--k", "--k-shots"),
        )
    ]
    help_text = parser.format_help()
    assert "--out " not in help_text and "--jpeg_quality" not in help_text
    # After `--`, nothing is rewritten.
    assert parser.new_spellings(["--", "--out"]) == ["--", "--out"]


@pytest.mark.parametrize("repeat", [1, 2])
def test_dataset_is_a_repeatable_folder(repeat):
    from episodes.util.cli_style import add_dataset_argument, single_dataset

    parser = command_parser("demo")
    add_dataset_argument(parser)
    args = parser.parse_args(["--dataset", "a", "--dataset", "b"][: 2 * repeat])
    assert args.dataset == ["a", "b"][:repeat]
    if repeat == 1:
        assert single_dataset(args.dataset) == "a"
    else:
        with pytest.raises(ValueError, match="--dataset given 2 times"):
            single_dataset(args.dataset)


def test_old_positionals_become_their_options_with_one_note_each(capsys):
    from episodes.util.cli_style import add_dataset_argument

    parser = command_parser("demo")
    add_dataset_argument(parser)
    parser.add_argument("--output", required=True)
    parser.add_old_positional("url", "--dataset")
    parser.add_old_positional("local", "--output")
    args, rest = parser.parse_known_args(["s3://b/d", "here", "--s3_region_name", "eu"])
    assert (args.dataset, args.output, rest) == (["s3://b/d"], "here", ["--s3_region_name", "eu"])
    assert capsys.readouterr().err.splitlines() == [
        "note: the positional URL is now --dataset URL; the old form goes in version 0.3.0",
        "note: the positional LOCAL is now --output LOCAL; the old form goes in version 0.3.0",
    ]
    # The new form: a value of an unknown (Beam) flag is never taken for an old positional.
    args, rest = parser.parse_known_args(
        ["--dataset", "s3://b/d", "--output", "here", "--s3_region_name", "eu"]
    )
    assert (args.dataset, args.output, rest) == (["s3://b/d"], "here", ["--s3_region_name", "eu"])
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit):
        parser.parse_args([])  # still required: one of the two forms


def test_a_usage_error_is_one_line_in_every_command(capsys):
    """Issue 30: a wrong flag is one `error:` line pointing at --help (argparse printed the
    whole usage first, 30-60 lines), for every command and sub-command."""
    checked = 0
    for module in commands():
        for name, parser in command_parsers(module):
            if not isinstance(parser, argparse.ArgumentParser) or "--help" not in str(
                parser._option_string_actions
            ):
                continue
            with pytest.raises(SystemExit) as stopped:
                parser.parse_args(["--no-such-flag-here"])
            err = capsys.readouterr().err
            assert stopped.value.code == 2, name
            assert err.count("\n") == 1 and err.startswith("error: "), (name, err)
            assert err.rstrip().endswith(" --help)"), (name, err)
            checked += 1
    assert checked >= 25
