"""The output/input rule (issue 30, item 1): no command writes an output that is, contains or lies
inside one of its inputs, with or without --overwrite, for local paths and object-storage URLs.

`test_every_overwrite_command_is_covered` walks every `python -m` command's parsers: a command
that takes `--overwrite` must have its cases in COMMANDS (or say why it reads nothing). Each case
runs the command's real `main` with `--overwrite` in all three relations and checks one line
naming both flags, exit status 2, and every input byte-identical afterwards.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from episodes.util.cli_errors import run_main
from episodes.util.output_overlap import OutputOverlapsInputError, refuse_overlap, relation
from tests.fixtures.cli_processes import REPO, TINY, child_env
from tests.fixtures.command_walk import command_module, command_parsers, commands
from tests.fixtures.raw.omniglot import write_omniglot_fixture
from tests.fixtures.reader_datasets import write_dataset

# ----------------------------------------------------------------------------------------------
# The relation itself


@pytest.mark.parametrize(
    ("output", "input_path", "expected"),
    [
        ("data/raw", "data/raw", "is"),
        ("data/raw/", "data//raw", "is"),
        ("data/raw/../raw", "data/raw", "is"),
        ("data", "data/raw", "contains"),
        ("data/raw/converted", "data/raw", "lies inside"),
        ("data/raw2", "data/raw", None),  # a shared name prefix is not a parent
        ("data/converted", "data/raw", None),
        ("s3://bucket/raw", "s3://bucket/raw/", "is"),
        ("s3://bucket", "s3://bucket/raw", "contains"),
        ("s3://bucket/raw/out", "s3://bucket/raw", "lies inside"),
        ("s3://bucket/raw2", "s3://bucket/raw", None),
        ("s3://other/raw", "s3://bucket/raw", None),
        ("gs://bucket/raw", "s3://bucket/raw", None),  # another store
        ("s3://bucket/raw", "bucket/raw", None),  # a URL is never a local path
    ],
)
def test_relation(output, input_path, expected):
    assert relation(output, input_path) == expected


def test_relation_follows_links_and_file_urls(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    link = tmp_path / "link"
    link.symlink_to(raw, target_is_directory=True)
    assert relation(link, raw) == "is"
    assert relation(link / "out", raw) == "lies inside"
    assert relation(f"file://{raw}", raw) == "is"
    assert relation(tmp_path, f"file://{raw}") == "contains"


def test_refusal_is_one_line_naming_both_and_allowed_places(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(OutputOverlapsInputError) as caught:
        refuse_overlap(("--output", run / "x"), [("--dataset", tmp_path / "ds"), ("--run", run)])
    line = str(caught.value)
    assert "\n" not in line
    assert f"--output {run / 'x'} lies inside --run {run}" in line
    # a designed place inside an input is allowed; the input itself and its parents are not
    refuse_overlap(
        ("--output", run / "eval" / "a"), [("--run", run)], allowed_inside=[run / "eval"]
    )
    with pytest.raises(OutputOverlapsInputError, match="is the same path as --run"):
        refuse_overlap(("--output", run), [("--run", run)], allowed_inside=[run / "eval"])
    refuse_overlap(("--output", None), [("--run", run)])  # nothing to check
    refuse_overlap(("--output", run), [("--split-file", None)])


# ----------------------------------------------------------------------------------------------
# Every command that takes --overwrite


@dataclass(frozen=True)
class Case:
    """How to run a command whose output overlaps its input `protected`: `argv(output)`."""

    protected: Callable[[Path], Path]  # builds the input under the test folder, returns it
    argv: Callable[[Path, Path], list[str]]  # (input, output) -> the command's arguments
    input_flag: str
    output_flag: str = "--output"
    relations: tuple[str, ...] = ("is", "contains", "lies inside")


def _raw_omniglot(root: Path) -> Path:
    write_omniglot_fixture(root / "raw", drawers=2)
    return root / "raw"


def _raw_root(root: Path) -> Path:
    write_omniglot_fixture(root / "rawroot" / "omniglot", drawers=2)
    return root / "rawroot"


def _dataset(root: Path) -> Path:
    return write_dataset(root / "ds", per_class=(6,) * 9).root


def _dataset_named_as_its_cache(root: Path) -> Path:
    """A dataset at ROOT/decoded_8x8/decoded_8x8: `--cache-root ROOT` would make its cache
    folder (ROOT/<dataset folder name>/decoded_8x8) the dataset itself. The cache's designed
    place is inside the dataset, so that is the one overlap a cache job can have."""
    return write_dataset(root / "decoded_8x8" / "decoded_8x8", per_class=(6,) * 9).root


def _split(method: str) -> Callable[[Path, Path], list[str]]:
    return lambda ds, out: ["--method", method, "--dataset", str(ds), "--output", str(out)]


COMMANDS: dict[str, Case | str] = {
    "beam_pipelines.convert": Case(
        _raw_omniglot,
        lambda raw, out: ["--source", "omniglot", "--input", str(raw), "--output", str(out)],
        "--input",
    ),
    "beam_pipelines.convert_all": Case(
        _raw_root,
        lambda raw, out: ["--all", "--input", str(raw), "--output", str(out)],
        "--input",
    ),
    "beam_pipelines.episodes": Case(
        _dataset,
        lambda ds, out: [
            "--dataset",
            str(ds),
            "--split",
            "train",
            "--episodes",
            "2",
            "--output",
            str(out),
        ],
        "--dataset",
    ),
    "beam_pipelines.cache": Case(
        _dataset_named_as_its_cache,
        lambda ds, out: [
            "--dataset",
            str(ds),
            "--image-size",
            "8",
            "--cache-root",
            str(out.parents[1]),
        ],
        "--dataset",
        output_flag="cache folder",
        relations=("is",),
    ),
    "splits.embed": Case(
        _dataset,
        lambda ds, out: ["--dataset", str(ds), "--pretrain", "cnn4", "--output", f"{out}.npz"],
        "--dataset",
        relations=("lies inside",),  # a .npz file: never a folder that is or holds the input
    ),
    "splits.make": Case(_dataset, _split("random"), "--dataset"),
    "splits.random": "an old name of splits make --method random (the same run, with a note)",
    "splits.semantic": "an old name of splits make --method semantic (the same run, with a note)",
    "splits.atg": "an old name of splits make --method atg (the same run, with a note)",
    "episodes.fixml pool": Case(
        _dataset,
        lambda ds, out: ["pool", "--k", "1", "--dataset", str(ds), "--output", str(out)],
        "--dataset",
    ),
    "episodes.fixml holdout": Case(
        _dataset,
        lambda ds, out: [
            "holdout",
            "--fraction",
            "0.5",
            "--dataset",
            str(ds),
            "--output",
            str(out),
        ],
        "--dataset",
    ),
    "episodes.fetch": Case(
        _dataset,
        lambda ds, out: ["--dataset", f"file://{ds}", "--output", str(out)],
        "--dataset",
    ),
    "learners.evaluate": Case(
        lambda root: _tiny_run(root),
        lambda run, out: ["--run", str(run), "--episodes", "1", "--output", str(out)],
        "--run",
    ),
    "beam_pipelines.glyph_dataset": "reads no input (it draws the glyphs from --seed)",
    "splits.published show": "reads no input (the shipped published splits)",
}


def _output_for(protected: Path, how: str) -> Path:
    if how == "is":
        return protected
    if how == "contains":
        return protected.parent
    return protected / "inner"


def _tree(path: Path) -> dict[str, str]:
    """Every file and folder under `path` (and `path`), by relative name: content digest."""
    found = {}
    for item in sorted([path, *path.rglob("*")]):
        name = str(item.relative_to(path))
        found[name] = hashlib.sha256(item.read_bytes()).hexdigest() if item.is_file() else "dir"
    return found


def _tiny_run(root: Path) -> Path:
    dataset = write_dataset(root / "runds", per_class=(6,) * 9).root
    run = root / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "learners.train",
            "--method",
            "protonet",
            "--dataset",
            str(dataset),
            "--steps",
            "1",
            "--ways",
            "2",
            "--shots",
            "1",
            "--query",
            "1",
            "--validation-episodes",
            "0",
            "--output",
            str(run),
            *TINY,
        ],  # fmt: skip
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return run


def _run_main(command: str, argv: list[str]) -> int:
    module = command_module(command.split(" ")[0])  # a sub-command is the first of argv
    try:
        return run_main(module.main, [*argv, "--overwrite"])
    except SystemExit as exc:  # a command that ends through argparse's exit
        return int(exc.code or 0)


def overwrite_commands() -> set[str]:
    """Every command (and sub-command) whose parser takes --overwrite."""
    found = set()
    for command in commands():
        for name, parser in command_parsers(command):
            if any("--overwrite" in action.option_strings for action in parser._actions):
                found.add(name.split(" --source")[0].split(" --method")[0])
    return found


def test_every_overwrite_command_is_covered():
    missing = overwrite_commands() - set(COMMANDS)
    assert not missing, f"commands taking --overwrite without output/input cases: {missing}"
    assert not set(COMMANDS) - overwrite_commands(), "cases of commands that no longer exist"


CASES = [
    (c, how) for c, case in COMMANDS.items() if isinstance(case, Case) for how in case.relations
]


@pytest.mark.slow
@pytest.mark.parametrize(("command", "how"), CASES, ids=[f"{c}-{h}" for c, h in CASES])
def test_output_overlapping_an_input_is_refused_and_the_input_kept(
    command, how, tmp_path, capsys, monkeypatch
):
    case = COMMANDS[command]
    monkeypatch.chdir(tmp_path)
    protected = case.protected(tmp_path)
    before = _tree(protected.parent)
    output = _output_for(protected, how)
    argv = case.argv(protected, output)
    capsys.readouterr()
    status = _run_main(command, argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, err
    assert len(lines) == 1, err
    shown = "is the same path as" if how == "is" else how
    assert f" {shown} {case.input_flag} " in lines[0], lines[0]
    assert case.output_flag in lines[0]
    assert _tree(protected.parent) == before  # nothing deleted, added or changed


def test_train_refuses_a_run_folder_inside_its_dataset(tmp_path, capsys):
    from learners import train

    dataset = _dataset(tmp_path)
    argv = ["--method", "protonet", "--dataset", str(dataset), "--steps", "1"]
    before = _tree(dataset)
    status = train.main([*argv, "--output", str(dataset / "run"), *TINY])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in err
    assert f"--output {dataset / 'run'} lies inside --dataset {dataset}" in err
    assert _tree(dataset) == before


@pytest.mark.slow
def test_convert_over_its_raw_input_as_a_user_runs_it(tmp_path):
    """The reported loss: `convert --input RAW --output RAW --overwrite` deleted RAW."""
    raw = _raw_omniglot(tmp_path)
    before = _tree(raw)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "beam_pipelines.convert",
            "--source",
            "omniglot",
            "--input",
            str(raw),
            "--output",
            str(raw),
            "--overwrite",
        ],  # fmt: skip
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: --output {raw} is the same path as --input {raw}: writing there would replace "
        "or mix with the input; choose another --output, outside the input"
    )
    assert _tree(raw) == before
    assert sorted(os.listdir(raw)) == ["images_background", "images_evaluation"]
