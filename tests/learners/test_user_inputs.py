"""What the learners' commands make of a user's files and flags (issue 30 items 6 and 8):
evaluation folders that follow the split file's content, episode flags refused with episode
shards, `report kendall --last` below 2, a truncated or foreign summary.json, a recipe file with
a value of the wrong type, `--recipe PATH.toml` in --help, and no note where nothing is wrong."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from learners import evaluate as evaluate_cli
from learners import report
from learners import train as train_cli
from learners.evaluation.evaluation_folder import SPLIT_DIGEST_CHARS, split_file_tag
from learners.training.recipe_files import load_recipe
from tests.fixtures.cli_processes import TINY
from tests.fixtures.paths import REPO
from tests.fixtures.reader_datasets import write_dataset

EPISODES = ["--ways", "3", "--shots", "1", "--query", "1", "--validation-episodes", "0"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    """A converted dataset, a run trained on it, and two split files both named split.json
    (as an ATG sweep writes per dataset) with other test classes."""
    root = tmp_path_factory.mktemp("inputs")
    spec = write_dataset(root / "toy", per_class=(6,) * 12)
    names = spec.class_names
    for folder, test in (("a", names[8:12]), ("b", names[4:8])):
        (root / folder).mkdir()
        rest = [n for n in names if n not in test]
        split = {"train": rest[:4], "valid": rest[4:], "test": test}
        (root / folder / "split.json").write_text(json.dumps(split))
    run = root / "run"
    argv = ["--method", "protonet", "--dataset", str(spec.root), "--steps", "2", *EPISODES]
    assert train_cli.main([*argv, *TINY, "--output", str(run)]) == 0
    return {"root": root, "run": run, "dataset": spec.root}


def test_split_files_named_alike_get_their_own_default_folders(trained, capsys) -> None:
    common = ["--run", str(trained["run"]), "--episodes", "3", "--no-hardness", "--no-progress"]
    folders = []
    for folder in ("a", "b"):
        split_file = trained["root"] / folder / "split.json"
        assert evaluate_cli.main([*common, "--split-file", str(split_file)]) == 0
        wrote = capsys.readouterr().out.strip().splitlines()[-1]
        out = Path(wrote.split()[1].rsplit("/", 1)[0])
        assert out.name.endswith(f"-{split_file_tag(split_file)}")
        with (out / "classes.csv").open() as handle:
            tested = {int(row["class_id"]) for row in csv.DictReader(handle)}
        test = set(json.loads(split_file.read_text())["test"])
        assert {f"toy_class_{c:02d}" for c in tested} <= test  # each its own split's classes
        folders.append(out)
    assert folders[0] != folders[1] and all(f.parent == trained["run"] / "eval" for f in folders)
    tag = split_file_tag(trained["root"] / "a" / "split.json")
    assert re.fullmatch(rf"split-split-[0-9a-f]{{{SPLIT_DIGEST_CHARS}}}", tag)


def test_the_digest_follows_the_content_not_the_place(tmp_path) -> None:
    first, second = tmp_path / "x" / "s.json", tmp_path / "y" / "s.json"
    for path, text in ((first, '{"test": ["a"]}'), (second, '{"test": ["a"]}')):
        path.parent.mkdir()
        path.write_text(text)
    assert split_file_tag(first) == split_file_tag(second)
    second.write_text('{"test": ["b"]}')  # a sweep rewrote it with other classes
    assert split_file_tag(first) != split_file_tag(second)


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--ways", "5"], "--ways"),
        (["--shots", "1", "--query", "15"], "--shots and --query"),
        (["--base-novel-lambda", "0"], "--base-novel-lambda"),
        (["--split", "valid"], "--split"),
    ],
)
def test_episode_flags_with_episode_shards_are_refused(trained, tmp_path, capsys, flags, named):
    shards = tmp_path / "shards"
    shards.mkdir()
    out = tmp_path / "eval"
    argv = ["--run", str(trained["run"]), "--episode-shards", str(shards), "--output", str(out)]
    assert evaluate_cli.main([*argv, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {named} with --episode-shards {shards}: the shards hold")
    assert err.count("\n") == 1 and not out.exists()


def test_no_note_about_a_missing_split_file(trained, tmp_path, capsys) -> None:
    argv = ["--method", "protonet", "--dataset", str(trained["dataset"]), "--steps", "1"]
    assert train_cli.main([*argv, *EPISODES, *TINY, "--output", str(tmp_path / "r")]) == 0
    assert "no --split-file" not in capsys.readouterr().err


# --- learners.report ---------------------------------------------------------------------


def _evaluation(folder: Path, summary: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(summary)
    return folder


@pytest.mark.parametrize("last", ["-1", "0", "1"])
def test_kendall_refuses_a_last_below_two(tmp_path, capsys, last) -> None:
    assert report.main(["kendall", "--run", str(tmp_path), "--last", last]) == 2
    assert capsys.readouterr().err == (
        f"error: --last {last}: expected >= 2 (a ranking of the last K snapshots)\n"
    )


def test_a_truncated_summary_is_one_line_naming_the_file(tmp_path, capsys) -> None:
    whole = json.dumps({"accuracy": {"mean": 0.5, "ci95": 0.01}, "per_source": {}})
    folder = _evaluation(tmp_path / "eval", whole[: len(whole) // 2])
    assert report.main(["seeds", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {folder / 'summary.json'}: not valid JSON (")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "summary, broken",
    [
        ({"per_source": {}}, "accuracy"),
        ({"accuracy": {"mean": 0.5}}, "accuracy"),
        ({"accuracy": {"mean": 0.5, "ci95": 0.1}, "per_source": {"a": 3}}, "per_source.a"),
    ],
)
def test_a_summary_without_its_accuracies_names_file_and_field(tmp_path, capsys, summary, broken):
    folder = _evaluation(tmp_path / "eval", json.dumps(summary))
    assert report.main(["ranks", str(folder)]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: {folder / 'summary.json'}: {broken!r} is not an accuracy"
    )


def test_a_folder_without_summary_is_refused(tmp_path, capsys) -> None:
    assert report.main(["seeds", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path}: no summary.json (not a learners.evaluate folder)\n"
    )


# --- recipe files ------------------------------------------------------------------------


def _recipe(path: Path, key: str, value: str) -> Path:
    path.write_text(
        'description = "d"\nreference = "r"\n'
        '[options.method]\nvalue = "protonet"\nsource = "s"\n'
        f'[options.{key}]\nvalue = {value}\nsource = "s"\n'
    )
    return path


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("lr", '"fast"', "value 'fast': expected a number (float) (the value of --lr)"),
        ("lr", "[1, 2]", "value [1, 2]: expected a number (float)"),
        ("checkpoint_every", "2.5", "value 2.5: expected a number (int)"),
        ("checkpoint_every", "true", "value True: expected a number (int)"),
        ("dropblock", '"yes"', "value 'yes': expected true or false (the value of --dropblock)"),
        ("backbone", "3", "value 3: expected a string (the value of --backbone)"),
    ],
)
def test_a_recipe_value_of_the_wrong_type_names_file_and_key(
    tmp_path, capsys, key, value, expected
):
    path = _recipe(tmp_path / "mine.toml", key, value)
    out = tmp_path / "run"
    argv = ["--recipe", str(path), "--synthetic", "--steps", "1", *TINY, "--output", str(out)]
    assert train_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: [options.{key}] {expected}") and err.count("\n") == 1
    assert not out.exists()


def test_a_recipe_of_the_length_under_its_old_key_still_runs(tmp_path, capsys) -> None:
    """`[options.episodes]` (learners.train's --episodes, now --steps) loads as `steps` with a
    note, and a length given on the command line is recorded as overriding it."""
    path = _recipe(tmp_path / "old.toml", "episodes", "3")
    assert load_recipe(str(path)).values == {"method": "protonet", "steps": 3}
    assert "[options.episodes] is now [options.steps]" in capsys.readouterr().err
    out = tmp_path / "run"
    argv = ["--recipe", str(path), "--synthetic", "--episodes", "1", *EPISODES, *TINY]
    assert train_cli.main([*argv, "--validation-episodes", "0", "--output", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["total_steps"] == 1
    assert config["extra"]["recipe_overrides"] == {"steps": {"recipe": 3, "given": 1}}


def test_a_recipe_file_of_ones_own_runs_and_is_documented(tmp_path, capsys) -> None:
    path = _recipe(tmp_path / "mine.toml", "lr", "0.002")
    assert load_recipe(str(path)).values == {"method": "protonet", "lr": 0.002}
    out = tmp_path / "run"
    argv = ["--recipe", str(path), "--synthetic", "--steps", "1", *EPISODES, *TINY]
    assert train_cli.main([*argv, "--output", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["learner"]["lr"] == 0.002 and config["extra"]["recipe"] == str(path)
    recipe_help = next(
        a.help for a in train_cli.build_parser()._actions if "--recipe" in a.option_strings
    )
    assert "PATH.toml" in recipe_help and "FAMILY/NAME" in recipe_help
    readme = (REPO / "docs" / "learners.md").read_text()
    assert "`--recipe\nPATH.toml`" in readme or "`--recipe PATH.toml`" in readme


@pytest.mark.parametrize(
    "text, expected",
    [
        (None, "not valid JSON ("),  # cut in half
        ('{"seed": 1}', "not a learners.train config.json (KeyError: 'learner')"),
    ],
)
def test_a_damaged_run_config_is_one_line_naming_it(trained, tmp_path, capsys, text, expected):
    run = Path(shutil.copytree(trained["run"], tmp_path / "run"))
    config = run / "config.json"
    whole = config.read_text()
    config.write_text(whole[: len(whole) // 2] if text is None else text)
    assert evaluate_cli.main(["--run", str(run), "--episodes", "2", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {config}: {expected}") and err.count("\n") == 1
    argv = ["--method", "protonet", "--dataset", str(trained["dataset"]), "--steps", "3"]
    assert train_cli.main([*argv, *EPISODES, *TINY, "--output", str(run)]) == 2  # resuming it
    assert capsys.readouterr().err.startswith(f"error: {config}: {expected}")
