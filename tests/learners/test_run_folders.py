"""Training runs that survive what clusters do to them (issue 25, items 4, 5 and 6): one
learners.train per run folder, resuming from the newest intact snapshot with logs that match
it, damaged checkpoints named in one line (never advising weights_only=False), every float
option checked and a non-finite loss stopping the run with its step and last good snapshot."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from learners import evaluate
from learners import train as train_cli
from learners.training.run_checkpoints import ResumePoint, resume_point
from learners.training.training_loop import NonFiniteLossError, check_loss
from tests.fixtures.cli_processes import REPO, TINY, start_python_m

torch.set_num_threads(1)


def train_args(run: Path, episodes: int = 6, *extra: str) -> list[str]:
    return [
        "--method", "protonet", "--synthetic", "--steps", str(episodes),
        "--checkpoint-every", "2", "--validation-episodes", "2", "--output", str(run),
        *TINY, *extra,
    ]  # fmt: skip


def logged_steps(run: Path, name: str = "train_log.csv") -> list[int]:
    with (run / name).open() as handle:
        return [int(row["step"]) for row in csv.DictReader(handle)]


def checkpoints(run: Path) -> Path:
    return run / "checkpoints"


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "weights_only" not in err
    return lines[0]


@pytest.mark.slow
def test_a_second_train_on_one_output_is_refused_while_the_first_lives(tmp_path: Path, capsys):
    run = tmp_path / "run"
    first = start_python_m("learners.train", *train_args(run, 100000))
    try:
        deadline = time.monotonic() + 120
        while not list(checkpoints(run).glob("step_*.pt")):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.1)
        assert train_cli.main(train_args(run, 100000)) == 2
        line = one_error_line(capsys.readouterr().err)
        assert line.startswith(f"error: {run}: another learners.train is training this run")
        assert f"pid {first.pid} " in line
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 128 + signal.SIGTERM
    assert not (run / ".lock").exists()  # released on SIGTERM
    rows = logged_steps(run)
    assert rows == list(range(1, len(rows) + 1))  # the first run's rows only, each step once


def test_deleting_last_resumes_from_the_newest_snapshot_with_matching_logs(
    tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"
    assert train_cli.main(train_args(run, 6)) == 0
    (checkpoints(run) / "last.pt").unlink()
    (checkpoints(run) / "step_00000006.pt").unlink()  # the newest left: step 4
    capsys.readouterr()
    assert train_cli.main(train_args(run, 8)) == 0
    out, err = capsys.readouterr()
    assert "steps 4->8" in out
    assert f"note: {checkpoints(run) / 'last.pt'} is missing; resuming from " in err
    assert logged_steps(run) == list(range(1, 9))  # 1..4 kept, 5..8 trained again: no doubles
    assert logged_steps(run, "validation.csv") == [2, 4, 6, 8]
    # rows with no checkpoint at all (stopped in the first validation): start over, cleanly
    for path in checkpoints(run).iterdir():
        path.unlink()
    assert train_cli.main(train_args(run, 2)) == 0
    assert logged_steps(run) == [1, 2] and logged_steps(run, "validation.csv") == [2]


def test_damaged_checkpoints_end_in_one_line_naming_the_intact_snapshot(
    tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"
    assert train_cli.main(train_args(run, 4)) == 0
    last = checkpoints(run) / "last.pt"
    snapshot4, snapshot2 = (
        checkpoints(run) / "step_00000004.pt",
        checkpoints(run) / "step_00000002.pt",
    )
    data = snapshot4.read_bytes()
    for damaged in (last, snapshot4):  # a hard link pair: write both as separate cut copies
        damaged.unlink()
        damaged.write_bytes(data[: len(data) // 2])
    capsys.readouterr()
    # evaluating the damaged file: one line naming it and the snapshot that is intact
    args = ["--run", str(run), "--checkpoint", "last", "--episodes", "2", "--no-progress"]
    assert evaluate.main(args) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {last}: damaged checkpoint, cannot be read (")
    assert line.endswith(f"the newest intact snapshot is {snapshot2} (step 2)")
    assert not (run / "eval").exists()
    # training on: from the intact snapshot, saying so
    assert train_cli.main(train_args(run, 6)) == 0
    out, err = capsys.readouterr()
    assert "steps 2->6" in out and f"resuming from {snapshot2} (step 2)" in err
    assert logged_steps(run) == list(range(1, 7))
    # nothing intact left: one line, nothing trained over it
    for path in checkpoints(run).glob("*.pt"):
        path.write_bytes(b"not a checkpoint")
    assert train_cli.main(train_args(run, 8)) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "damaged checkpoint" in line and "no intact snapshot" in line and "new --output" in line


def test_resume_reads_the_checkpoint_once_and_loads_the_bytes_it_checked(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert train_cli.main(train_args(run, 4)) == 0
    folder, last = checkpoints(run), checkpoints(run) / "last.pt"
    point = resume_point(folder, last)
    assert point.path == last and point.note is None and point.data == last.read_bytes()
    last.unlink()  # a hard link to step 4's snapshot: replaced, not written through
    last.write_bytes(b"replaced after the check")  # what was checked is what is loaded
    assert torch.load(io.BytesIO(point.data), weights_only=True)["step"] == 4
    last.unlink()
    point = resume_point(folder, last)
    snapshot4 = folder / "step_00000004.pt"
    assert point.path == snapshot4 and point.data == snapshot4.read_bytes()
    assert point.note == f"note: {last} is missing; resuming from {snapshot4} (step 4)"
    assert resume_point(tmp_path / "none", tmp_path / "none" / "last.pt") == ResumePoint()


def test_a_changed_option_names_its_values(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    assert train_cli.main(train_args(run, 2, "--lr", "0.01")) == 0
    capsys.readouterr()
    assert train_cli.main(train_args(run, 4, "--lr", "0.001")) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "learner.lr 0.01 -> 0.001" in line and "['learner']" not in line
    assert json.loads((run / "config.json").read_text())["learner"]["lr"] == 0.01


@pytest.mark.parametrize(
    "flag, value",
    [("--weight-decay", "nan"), ("--lr", "inf"), ("--width", "nan"), ("--weight-decay", "-0.5")],
)
def test_every_float_option_is_checked_before_anything_is_written(
    tmp_path: Path, capsys, flag: str, value: str
) -> None:
    run = tmp_path / "run"
    # a learner option's flag refuses a non-finite value as it parses (the config layer's
    # finite_float: argparse's exit 2); the others say it when the options are checked
    try:
        code = train_cli.main(train_args(run, 2, flag, value))
    except SystemExit as parse_exit:
        code = parse_exit.code
    assert code == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {flag} {value}: expected ") or line.startswith(
        f"error: argument {flag}: {value!r}: expected a finite number"
    )
    assert not run.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "1e999"])
def test_float_flags_of_other_commands_refuse_non_finite_values(capsys, value: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        evaluate.build_parser().parse_args(["--run", "r", "--base-novel-lambda", value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"--base-novel-lambda: {value!r}: expected a finite number" in err


@pytest.mark.slow
def test_a_non_finite_loss_stops_with_the_step_and_the_last_good_snapshot(tmp_path: Path):
    run = tmp_path / "run"
    args = [*train_args(run, 20, "--optimizer", "sgd", "--lr", "1e30"), "--validation-episodes"]
    result = subprocess.run(
        [sys.executable, "-m", "learners.train", *args, "0"],
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    line = one_error_line(result.stderr)
    step = int(line.split("error: step ")[1].split(":")[0])
    assert 1 <= step < 20 and "the training loss is nan" in line and "lower --lr" in line
    kept = sorted(p.name for p in checkpoints(run).glob("step_*.pt"))
    if kept:  # the last good one is named; nothing after the bad step was saved or logged
        assert f"the last good snapshot is {checkpoints(run) / kept[-1]}" in line
        assert max(logged_steps(run)) < step
    else:
        assert "no snapshot was saved yet" in line and not (run / "train_log.csv").exists()
    # the same check names the newest snapshot when there is one
    (checkpoints(run) / "step_00000004.pt").write_bytes(b"")
    learner = SimpleNamespace(precision=SimpleNamespace(mode="off"))
    with pytest.raises(NonFiniteLossError, match=r"^step 5: the training loss is inf; .*"):
        check_loss(float("inf"), 5, run, learner)
    with pytest.raises(NonFiniteLossError, match="last good snapshot is .*step_00000004.pt"):
        check_loss(float("nan"), 5, run, learner)
    check_loss(1.5, 5, run, learner)  # a finite loss goes on
