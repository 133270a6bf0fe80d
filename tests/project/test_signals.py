"""SIGTERM treated as Ctrl-C (issue 25, item 2): what `timeout`, `docker stop`, Slurm and systemd
send ends every long-running command in one line, exit 143, with its staging folder, lock and
shared-memory segments gone; and kill -9 leftovers of each kind are removed by the next run.

SIGTERM goes to the command's process only (as `timeout` and `docker stop` send it), real
processes throughout; waits are for observable states, with generous limits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.cli_processes import REPO, TINY
from tests.fixtures.conversion_processes import (
    PIPELINE_STARTED_S,
    SLOW,
    STOPS_WITHIN_S,
    convert_command,
    run_command,
    staging_folders,
    start_in_own_group,
    wait_for,
    wait_group_gone,
    wait_pipeline_running,
)
from tests.fixtures.reader_datasets import write_dataset

EXIT_TERMINATED = 128 + signal.SIGTERM


def _said(stdout: str, stderr: str) -> list[str]:
    """What a command said, progress lines aside."""
    return [line for line in (stdout + stderr).splitlines() if line.strip() and line[0] != "["]


def _segments_of(pid: int) -> list[str]:
    return sorted(p.name for p in Path("/dev/shm").glob(f"fst{pid:x}_*"))


def _a_minute_later(pid: int) -> None:
    """Age a dead process's segments past the minute the next run waits before removing one
    (episodes.util.shared_segments.DEAD_SEGMENT_AGE_S), as a later run would find them."""
    for name in _segments_of(pid):
        os.utime(Path("/dev/shm") / name, (0, 0))


@pytest.mark.slow
def test_sigterm_stops_a_conversion_like_ctrl_c(slow_raw, tmp_path):
    out = tmp_path / "omniglot"
    proc = start_in_own_group(convert_command(slow_raw, out, *SLOW))
    wait_pipeline_running(out, proc)
    sent = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)  # as `timeout` sends it: the command's process only
    stdout, stderr = proc.communicate(timeout=STOPS_WITHIN_S * 3)
    assert time.monotonic() - sent < STOPS_WITHIN_S
    assert proc.returncode == EXIT_TERMINATED, stderr
    said = _said(stdout, stderr)
    assert len(said) == 1 and said[0].startswith("interrupted: conversion stopped"), said
    assert "Traceback" not in stderr
    assert not staging_folders(out) and not out.exists()
    assert not (out.parent / f".{out.name}.lock").exists()
    wait_group_gone(proc.pid)


@pytest.mark.slow
def test_kill_9_of_a_conversion_is_silent_and_clean_only_removes_its_leftovers(
    slow_raw,
    tmp_path,
):
    """kill -9 of a 2-worker conversion's launcher: its workers end with it without a line
    (they printed a hundred lines of gRPC tracebacks); `convert --clean-only` then removes the
    staging folder it left, converting nothing, and says so; a second call finds nothing."""
    out = tmp_path / "omniglot"
    proc = start_in_own_group(convert_command(slow_raw, out, *SLOW))
    staging = wait_pipeline_running(out, proc)
    os.kill(proc.pid, signal.SIGKILL)  # the launcher only: its workers are left orphaned
    stdout, stderr = proc.communicate(timeout=STOPS_WITHIN_S * 3)
    wait_group_gone(proc.pid)
    assert _said(stdout, stderr) == [], stderr[-3000:]
    assert staging.is_dir() and not out.exists()
    cleaned = run_command(
        [sys.executable, "-m", "beam_pipelines.convert", "--clean-only", "--output", str(out)]
    )
    assert cleaned.returncode == 0, cleaned.stderr
    assert cleaned.stdout.strip() == f"cleaned {out}: 1 leftover(s) of killed runs removed"
    assert cleaned.stderr.strip() == (
        f"removed {staging}: left by a conversion that did not finish"
    )
    assert not staging_folders(out) and not out.exists()
    again = run_command(
        [sys.executable, "-m", "beam_pipelines.convert", "--clean-only", "--output", str(out)]
    )
    assert again.stdout.strip() == f"cleaned {out}: nothing left over by killed runs"


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("signals") / "toy", per_class=(12,) * 15).root


def _shards_cmd(dataset: Path, out: Path, episodes: int) -> list[str]:
    return [
        sys.executable, "-m", "beam_pipelines.episodes", "--dataset", str(dataset),
        "--split", "train", "--episodes", str(episodes), "--num-shards", "4",
        "--output", str(out), "--direct_num_workers", "2",
    ]  # fmt: skip


@pytest.mark.slow
def test_sigterm_and_kill_9_in_the_shards_job_leave_nothing_after_the_next_run(
    small_dataset: Path, tmp_path: Path
) -> None:
    out = tmp_path / "shards"
    leftovers = lambda: sorted(tmp_path.glob(".shards.*"))  # noqa: E731
    for stop in (signal.SIGTERM, signal.SIGKILL):
        proc = start_in_own_group(_shards_cmd(small_dataset, out, 200000))
        wait_for(lambda: sorted(tmp_path.glob(".shards.tmp-*")), "the staging folder", proc=proc)
        time.sleep(PIPELINE_STARTED_S)
        assert proc.poll() is None, "the shards job ended early"
        os.kill(proc.pid, stop)
        stdout, stderr = proc.communicate(timeout=STOPS_WITHIN_S * 3)
        wait_group_gone(proc.pid)
        if stop == signal.SIGTERM:
            assert proc.returncode == EXIT_TERMINATED, stderr
            assert _said(stdout, stderr) == [
                f"interrupted: shards job stopped and its staging folder removed; {out} was not "
                "written"
            ]
            assert leftovers() == [] and not out.exists()
    staging = [p for p in leftovers() if ".tmp-" in p.name]
    assert len(staging) == 1  # what kill -9 leaves (its lock file, if any, is not held)
    again = run_command(_shards_cmd(small_dataset, out, 8))
    assert again.returncode == 0, again.stderr
    assert f"removed {staging[0]}: left by a shards job that did not finish" in again.stderr
    assert leftovers() == [] and (out / "episodes.json").is_file()


@pytest.mark.slow
def test_a_second_shards_job_on_one_output_is_refused_while_the_first_lives(
    small_dataset: Path, tmp_path: Path
) -> None:
    out = tmp_path / "shards"
    first = start_in_own_group(_shards_cmd(small_dataset, out, 200000))
    try:
        wait_for(lambda: sorted(tmp_path.glob(".shards.tmp-*")), "the staging folder", proc=first)
        second = run_command(_shards_cmd(small_dataset, out, 8))
        assert second.returncode == 2
        assert second.stderr.startswith(f"error: {out}: another conversion is writing this")
        assert f"pid {first.pid} " in second.stderr and len(second.stderr.splitlines()) == 1
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=STOPS_WITHIN_S * 3)
    assert sorted(tmp_path.glob(".shards.*")) == []


def _reader(dataset: Path, episodes: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "episodes.read", "--dataset", str(dataset), "--split", "train"]
    cmd += ["--episodes", str(episodes), "--decode-processes", "2", "--ways", "5", "--shots", "5"]
    return subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow
def test_sigterm_to_the_reader_leaves_no_shared_memory_and_kill_9_leftovers_go(
    small_dataset: Path,
) -> None:
    proc = _reader(small_dataset, 10**6)
    assert proc.stdout.readline().startswith("datasets:")
    for _ in range(20):  # episodes read: decode processes and segments at work
        assert proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_TERMINATED, stderr
    assert stderr.strip() == "interrupted" and "Traceback" not in stderr
    assert _segments_of(proc.pid) == []
    # A process killed outright cleans nothing: the next reader removes what it left.
    code = (
        "import os; from episodes.util.shared_segments import create_segment; "
        "[create_segment(1 << 16) for _ in range(2)]; os._exit(0)"
    )
    dead = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    assert dead.wait(timeout=60) == 0 and len(_segments_of(dead.pid)) == 2
    fresh = _reader(small_dataset, 2)  # a minute has not passed: they might be another
    fresh.communicate(timeout=120)  # PID namespace's live segments, so they stay
    assert fresh.returncode == 0 and len(_segments_of(dead.pid)) == 2
    _a_minute_later(dead.pid)
    reader = _reader(small_dataset, 2)
    reader.communicate(timeout=120)
    assert reader.returncode == 0
    assert _segments_of(dead.pid) == [] and _segments_of(reader.pid) == []


def test_kill_9_of_the_reader_leaves_its_decode_processes_silent(small_dataset: Path) -> None:
    """Issue 30: the decode processes of a reader killed outright end without a word (they
    printed 56 lines of BrokenPipeError tracebacks into the user's terminal)."""
    proc = _reader(small_dataset, 10**6)
    assert proc.stdout.readline().startswith("datasets:")
    for _ in range(20):
        assert proc.stdout.readline()
    children = [
        int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    ]
    assert len(children) >= 2  # the decode processes
    proc.kill()
    _, stderr = proc.communicate(timeout=60)  # the pipe closes once the children are gone too
    assert proc.returncode == -signal.SIGKILL
    assert stderr == ""


def _train(dataset: Path, run: Path, episodes: int) -> list[str]:
    return [
        sys.executable, "-m", "learners.train", "--method", "protonet", "--dataset",
        str(dataset), "--steps", str(episodes), "--checkpoint-every", "2",
        "--validation-episodes", "0", "--decode-processes", "2", "--ways", "5", "--shots",
        "1", "--query", "2", "--output", str(run), *TINY,
    ]  # fmt: skip


def _newest_step(run: Path) -> int:
    return max((int(p.stem[5:]) for p in (run / "checkpoints").glob("step_*.pt")), default=0)


@pytest.mark.slow
def test_sigterm_and_kill_9_of_train_with_decode_processes_leave_nothing(
    small_dataset: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    run = tmp_path / "run"
    for stop in (signal.SIGTERM, signal.SIGKILL):
        proc = subprocess.Popen(
            _train(small_dataset, run, 100000),
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        newest = _newest_step(run)
        wait_for(lambda n=newest: _newest_step(run) > n, "a new snapshot", proc=proc)
        proc.send_signal(stop)
        _, stderr = proc.communicate(timeout=60)
        if stop == signal.SIGTERM:
            assert proc.returncode == EXIT_TERMINATED, stderr
            lines = [line for line in stderr.splitlines() if line.startswith("interrupted")]
            assert len(lines) == 1 and "Traceback" not in stderr, stderr
            assert lines[0].startswith(f"interrupted ({run}: last checkpoint step ")
            assert "resume with the same command: python -m learners.train" in lines[0]
            assert _segments_of(proc.pid) == [] and not (run / ".lock").exists()
    killed = proc.pid
    _a_minute_later(killed)
    step = _newest_step(run)
    again = subprocess.run(
        _train(small_dataset, run, step + 2), cwd=REPO, env=env, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr
    assert _segments_of(killed) == [] and not (run / ".lock").exists()
    with (run / "train_log.csv").open() as handle:
        steps = [int(line.split(",")[0]) for line in list(handle)[1:]]
    assert steps == list(range(1, step + 3))  # each step once, across three processes
