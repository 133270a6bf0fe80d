"""One meaning per flag name across every `python -m` command (issue 35 item 3).

The test walks every parser (tests/fixtures/command_walk.py). A flag whose help or value kind differs
between the places that declare it must be in MEANINGS, the table of what it means: the kind of
value it takes there (a switch, a number or text) and words every declaration's help uses to
say so. `--resize` as a pixel size beside `--resize` as a resampling method, or `--lambda` as
FIX-ML's mixing beside ATG's penalty weight, fail here.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from dataclasses import dataclass

import pytest

from episodes.util.cli_style import finite_float
from tests.fixtures.command_walk import command_parsers, commands


@dataclass(frozen=True)
class Meaning:
    """What a flag means: its value's kind and a pattern each declaration's help matches."""

    meaning: str
    kind: str  # "switch", "number" or "text"
    words: str  # a regular expression, matched case-insensitively against the help


MEANINGS: dict[str, Meaning] = {
    "--all": Meaning(
        "every source (of the raw folder, or that downloads)", "switch", r"every source"
    ),
    "--batch-norm": Meaning("the BatchNorm convention", "text", r"batchnorm"),
    "--batch-size": Meaning("examples per batch", "number", r"batch"),
    "--cache-root": Meaning("the folder of decoded caches", "text", r"decoded caches"),
    "--class-names": Meaning("a file of class names", "text", r"class (names|list)"),
    "--dataset": Meaning("a converted dataset folder", "text", r"dataset folder"),
    "--decode-device": Meaning("where JPEG records are decoded", "text", r"decode"),
    "--decode-processes": Meaning("processes that decode records", "number", r"processes"),
    "--device": Meaning("the torch device", "text", r"cuda"),
    "--embeddings": Meaning("a class embeddings file", "text", r"embeddings"),
    "--episodes": Meaning(
        "how many episodes the command reads, writes or evaluates",
        "number",
        r"number of episodes|evaluation episodes",
    ),
    "--image-size": Meaning("an image side in pixels", "number", r"image side in pixels"),
    "--index-cache-dir": Meaning(
        "where built record indexes live", "text", r"\.index files|indexes"
    ),
    "--list": Meaning(
        "list what the command knows, and exit", "switch", r"^list every .* and exit$"
    ),
    "--lr": Meaning("the optimiser's learning rate", "number", r"learning rate"),
    "--method": Meaning(
        "the registered method (algorithm) the command runs", "text", r"how to split|learner"
    ),
    "--no-progress": Meaning("no progress lines", "switch", r"progress"),
    "--output": Meaning("what the command writes", "text", r"folder|file|path|plot"),
    "--overwrite": Meaning("replace an existing output", "switch", r"replace"),
    "--query": Meaning("query examples per class", "number", r"query examples per class"),
    "--resize": Meaning("the resampling method", "text", r"resampling method"),
    "--run": Meaning("a learners run folder", "text", r"run folder"),
    "--seed": Meaning("the random seed", "number", r"seed"),
    "--shots": Meaning("support examples per class", "number", r"shots|support examples"),
    "--source": Meaning("a source name", "text", r"source name"),
    "--split": Meaning("a split name: train, valid or test", "text", r"train, valid or test"),
    "--split-file": Meaning("a split file", "text", r"split (json|file)|train/valid/test"),
    "--storage-timeout": Meaning(
        "the object-storage access check's wait", "number", r"access check"
    ),
    "--threads": Meaning("decoding threads", "number", r"decoding threads"),
    "--torch-threads": Meaning("torch's CPU threads", "number", r"torch (cpu )?threads"),
    "--ways": Meaning("classes per episode", "number", r"ways|classes per episode"),
    "--width": Meaning("the backbone's channel width multiplier", "number", r"width|channel"),
}

# Old spellings of one meaning that must not come back as a current flag of a command.
FORMER_SPELLINGS = {"--size": "--image-size"}


def _kind(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "switch"
    if action.type in (int, float, finite_float):
        return "number"
    return "text"


def _help(action: argparse.Action) -> str:
    """The help without the '(default ...)' the config layer appends."""
    return re.sub(r"\s*\(default [^)]*\)$", "", action.help or "")


def declarations() -> dict[str, set[tuple[str, str, str]]]:
    """flag -> {(command, kind, help)} over every parser of every command."""
    found: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
    for command in commands():
        for _, parser in command_parsers(command):
            for action in parser._actions:
                if action.help == argparse.SUPPRESS or isinstance(
                    action, argparse._SubParsersAction
                ):
                    continue
                for flag in action.option_strings:
                    if flag.startswith("--") and flag != "--help":
                        found[flag].add((command, _kind(action), _help(action)))
    return found


DECLARATIONS = declarations()
SEVERAL = sorted(f for f, rows in DECLARATIONS.items() if len({r[1:] for r in rows}) > 1)


@pytest.mark.parametrize("flag", SEVERAL)
def test_a_flag_declared_differently_has_one_meaning(flag):
    assert flag in MEANINGS, (
        f"{flag} is declared with different help or value kinds: add its one meaning to "
        f"MEANINGS (or give one of them another name): {sorted(DECLARATIONS[flag])}"
    )
    meaning = MEANINGS[flag]
    wrong = []
    for command, kind, text in sorted(DECLARATIONS[flag]):
        if kind != meaning.kind:
            wrong.append(f"{command}: takes a {kind}, {flag} means {meaning.meaning}")
        elif not re.search(meaning.words, text, re.IGNORECASE):
            wrong.append(f"{command}: {text!r} does not say {meaning.meaning!r}")
    assert not wrong, "\n".join(wrong)


def test_the_tables_hold_only_what_is_declared():
    """An entry whose flag is gone (renamed, or no longer declared differently) goes too."""
    assert set(MEANINGS) <= set(DECLARATIONS)
    assert len({m.meaning for m in MEANINGS.values()}) == len(MEANINGS)  # one name per meaning


def test_a_former_spelling_is_no_current_flag():
    for old, new in FORMER_SPELLINGS.items():
        assert old not in DECLARATIONS, f"{old} is now {new}"


ATG = ["--method", "atg", "--divergence", "0.3"]


@pytest.mark.parametrize(
    "command, argv, old, dest, value",
    [
        ("beam_pipelines.convert", ["--resize", "64"], "--resize", "resize", 64),
        ("beam_pipelines.cache", ["--size", "32"], "--size", "image_size", 32),
        (
            "beam_pipelines.glyph_dataset",
            ["--output", "o", "--size", "64"],
            "--size",
            "image_size",
            64,
        ),
        ("splits.make", [*ATG, "--lambda", "2"], "--lambda", "lam", 2.0),
        ("splits.make", [*ATG, "--dtype", "float64"], "--dtype", "dtype", "float64"),
        ("splits.make", [*ATG, "--threads", "3"], "--threads", "threads", 3),
        ("splits.analyze", ["summary", "--split", "s.json"], "--split", "split_file", "s.json"),
    ],
)
def test_a_renamed_flag_still_parses_with_a_note(command, argv, old, dest, value, capsys):
    from tests.fixtures.command_walk import command_module

    module = command_module(command)
    if command == "beam_pipelines.convert":
        parser = module.build_parser("omniglot")
    elif command == "splits.make":
        parser = module.build_parser("atg")
    else:
        parser = module.build_parser()
    args, _ = parser.parse_known_args(argv)
    assert getattr(args, dest) == value
    note = capsys.readouterr().err
    assert f"note: {old} is now --" in note and "goes in version 0.3.0" in note
