"""The learners' commands as a user runs them, in the orders that used to lose or hide results:
the demo's train / evaluate / report commands (on the synthetic blob data, tiny sizes), a
second evaluation with other settings, a refused option, Ctrl-C, an unwritable output folder.
Each of these printed a traceback, overwrote a result or dropped one before."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from episodes.util.cli_errors import EXIT_INTERRUPTED, EXIT_USAGE
from learners import evaluate, report
from learners import train as train_cli
from tests.fixtures.cli_processes import TINY, python_m, start_python_m
from tests.fixtures.raw.omniglot import write_omniglot_fixture
from tests.fixtures.unwritable_folder import unwritable

torch.set_num_threads(1)


def multiclass_args(out: Path, *extra: str) -> list[str]:
    """The demo's multiclass pre-training command, shrunk to seconds on the synthetic data."""
    return [
        "--method",
        "multiclass",
        "--synthetic",
        "--steps",
        "4",
        "--batch-size",
        "16",
        "--checkpoint-every",
        "2",
        "--validation-episodes",
        "2",
        "--seed",
        "0",
        "--output",
        str(out),
        *TINY,
        *extra,
    ]


def eval_args(run: Path, shots: int, *extra: str) -> list[str]:
    """The demo's evaluation command (ways 5, query 15), few episodes."""
    return [
        "--run",
        str(run),
        "--split",
        "test",
        "--episodes",
        "3",
        "--ways",
        "5",
        "--shots",
        str(shots),
        "--query",
        "15",
        "--no-progress",
        *extra,
    ]


@pytest.fixture(scope="module")
def multiclass_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("runs") / "multiclass"
    assert train_cli.main(multiclass_args(run)) == 0
    return run


def summaries(run: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in (run / "eval").glob("*/summary.json")}


# --- 4: evaluate's default folder follows the settings; nothing is replaced silently -------


def test_a_5_shot_evaluation_no_longer_replaces_the_1_shot_one(multiclass_run: Path) -> None:
    assert evaluate.main(eval_args(multiclass_run, 1)) == 0
    first = summaries(multiclass_run)
    assert list(first) == ["test-best-5way1shot15query-3ep"]
    one_shot = multiclass_run / "eval" / "test-best-5way1shot15query-3ep" / "episodes.csv"
    before = one_shot.read_bytes()
    assert evaluate.main(eval_args(multiclass_run, 5)) == 0
    after = summaries(multiclass_run)
    assert sorted(after) == ["test-best-5way1shot15query-3ep", "test-best-5way5shot15query-3ep"]
    assert one_shot.read_bytes() == before
    assert [after[name]["settings"]["shots"] for name in sorted(after)] == [1, 5]
    # the same command again reproduces the same folder, byte for byte
    assert evaluate.main(eval_args(multiclass_run, 1)) == 0
    assert one_shot.read_bytes() == before


def test_an_explicit_out_with_other_settings_is_refused_unless_asked(
    multiclass_run: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "eval"
    assert evaluate.main(eval_args(multiclass_run, 1, "--output", str(out))) == 0
    before = (out / "summary.json").read_bytes()
    capsys.readouterr()
    assert evaluate.main(eval_args(multiclass_run, 5, "--output", str(out))) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(out) in err and "shots 1 -> 5" in err
    assert "--overwrite" in err
    assert (out / "summary.json").read_bytes() == before
    assert evaluate.main(eval_args(multiclass_run, 5, "--output", str(out), "--overwrite")) == 0
    assert json.loads((out / "summary.json").read_text())["settings"]["shots"] == 5
    # results of unknown settings (no summary) are not overwritten either
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "episodes.csv").write_text("episode,accuracy\n0,1.0\n")
    assert evaluate.main(eval_args(multiclass_run, 1, "--output", str(stray))) == 2
    assert "unknown settings" in capsys.readouterr().err
    assert (stray / "episodes.csv").read_text() == "episode,accuracy\n0,1.0\n"


# --- 5: report ranks shows every evaluation given ---------------------------------------


def test_report_ranks_keeps_two_evaluations_of_one_run(
    multiclass_run: Path, tmp_path: Path, capsys
) -> None:
    folders = []
    for shots in (1, 5):
        out = tmp_path / f"{shots}shot"
        assert evaluate.main(eval_args(multiclass_run, shots, "--output", str(out))) == 0
        folders.append(str(out))
    capsys.readouterr()
    assert report.main(["ranks", *folders]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "multiclass 5-way 1-shot" in header and "multiclass 5-way 5-shot" in header
    # the same --label twice: both columns stay, told apart by their folders
    labelled = []
    for shots in (1, 5):
        out = tmp_path / f"same-label-{shots}"
        args = eval_args(multiclass_run, shots, "--output", str(out), "--label", "mine")
        assert evaluate.main(args) == 0
        labelled.append(str(out))
    capsys.readouterr()
    assert report.main(["ranks", *labelled]) == 0
    table = capsys.readouterr().out.splitlines()
    assert f"mine [{labelled[0]}]" in table[0] and f"mine [{labelled[1]}]" in table[0]
    assert len(table[-1].split()) == 2 + 2  # "Avg. rank" and one rank per evaluation


# --- 6 and 7: train checks everything before writing, and saves what runs ---------------


def test_a_refused_backbone_leaves_nothing_and_the_fix_runs(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    args = multiclass_args(run)
    wrong = [*args[: args.index("cnn4")], "resnet99", *args[args.index("cnn4") + 1 :]]
    assert train_cli.main(wrong) == 2
    assert "unknown backbone 'resnet99'" in capsys.readouterr().err
    assert not run.exists()
    assert train_cli.main(args) == 0  # the corrected command is not "exists with other options"


def test_saved_config_says_which_inference_runs(tmp_path: Path, capsys) -> None:
    run = tmp_path / "knn"
    args = multiclass_args(run)
    args[args.index("multiclass")] = "knn"
    assert train_cli.main(args) == 0
    config = json.loads((run / "config.json").read_text())
    learner = config["learner"]
    assert learner["method"] == "knn" and learner["options"]["inference"] == "knn"
    checkpoint = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert checkpoint["config"]["options"]["inference"] == "knn"
    assert train_cli.main([*args, "--inference", "protonet"]) == 2
    assert "runs inference knn, not --inference protonet" in capsys.readouterr().err
    # a run saved before per-method configs (every option flat in "learner", inference
    # "protonet" for knn) still resumes with the same command
    flat = {k: v for k, v in learner.items() if k != "options"}
    flat.update(learner["options"], inference="protonet", inner_steps=5, relation_hidden=8)
    config["learner"] = flat
    (run / "config.json").write_text(json.dumps(config))
    assert train_cli.main(args) == 0
    assert "already trained" in capsys.readouterr().out


# --- 8: Ctrl-C ---------------------------------------------------------------------------


@pytest.mark.slow
def test_ctrl_c_prints_one_line_saying_how_to_resume(tmp_path: Path) -> None:
    run = tmp_path / "protonet"
    args = [
        "--method",
        "protonet",
        "--synthetic",
        "--steps",
        "100000",
        "--checkpoint-every",
        "2",
        "--validation-episodes",
        "0",
        "--output",
        str(run),
        *TINY,
    ]
    process = start_python_m("learners.train", *args)
    try:
        deadline = time.monotonic() + 120
        while not list((run / "checkpoints").glob("step_*.pt")):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == EXIT_INTERRUPTED
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "resume with the same command: python -m learners.train" in lines[0]
    assert "last checkpoint step" in lines[0] and str(run) in lines[0]
    step = int(lines[0].split("last checkpoint step ")[1].split(")")[0])
    assert step >= 2 and step % 2 == 0
    longer = [a if a != "100000" else str(step + 2) for a in args]  # training longer resumes
    resumed = python_m("learners.train", *longer)
    assert resumed.returncode == 0, resumed.stderr
    start = int(re.search(rf"steps (\d+)->{step + 2}\b", resumed.stdout).group(1))
    assert 2 <= start <= step  # from the last checkpoint (one behind if Ctrl-C hit its copy)


# --- 9: an output folder nobody can write ------------------------------------------------


def assert_one_line_naming(result: subprocess.CompletedProcess, path: Path) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == EXIT_USAGE, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(path) in lines[0], lines


@pytest.mark.slow
def test_unwritable_outputs_end_in_one_line_naming_the_path(
    multiclass_run: Path, tmp_path: Path
) -> None:
    with unwritable(tmp_path / "read-only") as folder:
        train = python_m("learners.train", *multiclass_args(folder / "run"))
        assert_one_line_naming(train, folder / "run")
        evaluation = python_m(
            "learners.evaluate", *eval_args(multiclass_run, 1, "--output", str(folder / "eval"))
        )
        assert_one_line_naming(evaluation, folder / "eval")
        classes = tmp_path / "classes.txt"
        classes.write_text("".join(f"class{i}\n" for i in range(10)))
        split = python_m(
            "splits",
            "make",
            "--method",
            "random",
            "--class-names",
            str(classes),
            "--output",
            str(folder / "s.json"),
        )
        assert_one_line_naming(split, folder / "s.json")  # the file asked for, not its temp
        raw = write_omniglot_fixture(tmp_path / "raw").root
        convert = python_m(
            "beam_pipelines.convert", "--source", "omniglot", "--input", str(raw),
            "--output", str(folder / "omniglot"),
        )  # fmt: skip
        assert_one_line_naming(convert, folder / "omniglot")  # not its hidden lock file
        assert sorted(p.name for p in folder.iterdir()) == []
