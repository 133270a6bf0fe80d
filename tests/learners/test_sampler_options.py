"""Meta-Dataset's sampler options reach learners.train and learners.evaluate (issue 35 item 1):
each SamplerConfig option is a flag of both, the run records the ones given, evaluation
inherits them (each given one replaces the run's), and a bad value is one line before any work."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from episodes.sampling.sampler_config import SamplerConfig
from episodes.util.config_flags import flag_fields, flag_of
from learners import evaluate
from learners import train as train_cli
from tests.fixtures.cli_processes import TINY
from tests.fixtures.reader_datasets import write_dataset

STEPS = ["--steps", "2", "--validation-episodes", "0"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """24 classes of 12 images: 8 per split, so variable ways could reach 8."""
    return write_dataset(tmp_path_factory.mktemp("sampler") / "toy", per_class=(12,) * 24).root


def _option_strings(parser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


@pytest.mark.parametrize("command", [train_cli, evaluate])
def test_every_sampler_option_is_a_flag_of_the_learners_commands(command):
    flags = _option_strings(command.build_parser())
    expected = {flag_of(field) for field in flag_fields(SamplerConfig) if field.name != "mode"}
    assert len(expected) == 20 and expected <= flags, sorted(expected - flags)


def _episodes(folder: Path) -> list[dict[str, str]]:
    with open(folder / "episodes.csv", newline="") as handle:
        return list(csv.DictReader(line for line in handle if not line.startswith("#")))


def test_a_run_records_its_sampler_options_and_evaluation_inherits_them(dataset, tmp_path):
    run = tmp_path / "run"
    sampler = ["--max-ways", "6", "--max-query-per-class", "2"]
    argv = ["--method", "protonet", "--dataset", str(dataset), *STEPS, *TINY, *sampler]
    assert train_cli.main([*argv, "--output", str(run)]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["episode_options"]["sampler"] == {"max_ways": 6, "max_query_per_class": 2}

    inherited = tmp_path / "eval_inherited"
    common = ["--run", str(run), "--episodes", "12", "--no-progress", "--device", "cpu"]
    assert evaluate.main([*common, "--output", str(inherited)]) == 0
    rows = _episodes(inherited)
    ways = [int(row["ways"]) for row in rows]
    assert len(rows) == 12 and set(ways) <= {5, 6} and len(set(ways)) == 2  # 5..6, both drawn
    assert all(int(r["query_size"]) <= 2 * int(r["ways"]) for r in rows)
    summary = json.loads((inherited / "summary.json").read_text())
    assert summary["settings"]["sampler"] == {"max_ways": 6, "max_query_per_class": 2}

    replaced = tmp_path / "eval_replaced"
    assert evaluate.main([*common, "--max-ways", "5", "--output", str(replaced)]) == 0
    assert {int(row["ways"]) for row in _episodes(replaced)} == {5}
    summary = json.loads((replaced / "summary.json").read_text())
    assert summary["settings"]["sampler"] == {"max_ways": 5, "max_query_per_class": 2}


def test_a_run_without_sampler_options_records_what_older_runs_record(dataset, tmp_path):
    run = tmp_path / "run"
    argv = ["--method", "protonet", "--dataset", str(dataset), "--ways", "5", *STEPS, *TINY]
    assert train_cli.main([*argv, "--output", str(run)]) == 0
    options = json.loads((run / "config.json").read_text())["episode_options"]
    assert "sampler" not in options and options["ways"] == 5


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--max-ways", "0"], "--max-ways 0: expected an integer >= 1"),
        (["--min-ways", "7", "--max-ways", "6"], "--min-ways 7 is larger than --max-ways 6"),
        (["--ignore-hierarchy-probability", "1.5"], "--ignore-hierarchy-probability 1.5"),
    ],
)
def test_a_bad_sampler_option_is_one_line_before_any_work(
    dataset, tmp_path, capsys, extra, expected
):
    run = tmp_path / "run"
    argv = ["--method", "protonet", "--dataset", str(dataset), *STEPS, *TINY, *extra]
    assert train_cli.main([*argv, "--output", str(run)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and "\n" not in error and expected in error, error
    assert not run.exists()


def test_sampler_options_with_synthetic_episodes_are_refused(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["--method", "protonet", "--synthetic", *STEPS, *TINY, "--max-ways", "6"]
    assert train_cli.main([*argv, "--output", str(run)]) == 2
    error = capsys.readouterr().err.strip()
    assert "--max-ways" in error and "--synthetic" in error and "\n" not in error, error
    assert not run.exists()


def test_sampler_options_with_episode_shards_are_refused(tmp_path, capsys):
    shards = tmp_path / "shards"
    argv = ["--run", str(tmp_path / "run"), "--episode-shards", str(shards), "--max-ways", "6"]
    assert evaluate.main([*argv, "--output", str(tmp_path / "eval")]) == 2
    error = capsys.readouterr().err.strip()
    assert "--max-ways with --episode-shards" in error and "\n" not in error, error
