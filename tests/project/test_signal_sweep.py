"""The SIGTERM / kill -9 sweep of issue 25 over the long-running commands the first signal tests
(tests/project/test_signals.py) left out: `convert --all`, `splits.embed`,
`beam_pipelines.cache`, `episodes.fetch`, `learners.evaluate` and `learners.train` with
DataLoader workers. SIGTERM mid-work ends each in one line, exit 143, nothing left behind;
after kill -9 the next run removes (or ignores) what the killed one left and succeeds.

Real processes and signals throughout; waits are for observable states (a staging folder, a
snapshot), with generous limits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from beam_pipelines.runners.interrupt_exit import descendant_pids
from tests.fixtures.cli_processes import REPO, TINY, python_m, start_python_m
from tests.fixtures.embedding_inputs import write_random_checkpoint
from tests.fixtures.raw.omniglot import write_omniglot_fixture
from tests.fixtures.reader_datasets import write_dataset

EXIT_TERMINATED = 128 + signal.SIGTERM
STOPS_WITHIN_S = 60  # expected: a second or two
WORKERS = ("--direct_num_workers", "2")


def _start(module: str, *args: str) -> subprocess.Popen:
    """`python -m module args` in its own process group, as a shell runs a foreground job."""
    return start_python_m(module, *args, start_new_session=True)


def _wait_for(condition: Callable[[], object], what: str, proc: subprocess.Popen) -> None:
    end = time.monotonic() + 120
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"ended (exit {proc.returncode}) before {what}: {proc.communicate()}")
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _said(stdout: str, stderr: str) -> list[str]:
    """What a command said, progress lines and notes aside."""
    return [
        line
        for line in (stdout + stderr).replace("\r", "\n").splitlines()
        if line.strip() and line[0] != "[" and not line.startswith(("note:", "evaluate:"))
    ]


def _gone(pids: list[int]) -> bool:
    """Whether every process of `pids` ended (zombies count as ended)."""
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            return False
    return True


def _wait_gone(pids: list[int]) -> None:
    end = time.monotonic() + 30
    while not _gone(pids) and time.monotonic() < end:
        time.sleep(0.1)
    assert _gone(pids), "worker processes outlived the command"


def _hidden_beside(target: Path) -> list[str]:
    """Leftovers of a job on `target`: hidden staging/replaced folders and files, its lock."""
    if not target.parent.is_dir():
        return []
    return sorted(p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}."))


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> dict[str, Path]:
    """A converted dataset, a checkpoint and an Omniglot raw root, shared by every case."""
    root = tmp_path_factory.mktemp("sweep")
    toy = write_dataset(root / "toy", per_class=(12,) * 15).root
    checkpoint = write_random_checkpoint(root / "model" / "checkpoints" / "last.pt")
    write_omniglot_fixture(root / "raw" / "omniglot", drawers=40)
    return {"toy": toy, "checkpoint": checkpoint, "raw": root / "raw"}


@dataclass(frozen=True)
class Job:
    """A Beam command writing one target through a hidden staging folder beside it."""

    module: str
    args: Callable[[dict[str, Path], Path], list[str]]  # (fixtures, scratch folder) -> flags
    target: Callable[[Path], Path]  # scratch folder -> what the command writes
    stopped: str  # how its SIGTERM line starts


JOBS = {
    "convert --all": Job(
        "beam_pipelines.convert",
        lambda w, d: (
            ["--all", "--input", str(w["raw"]), "--output", str(d / "out")]
            + ["--image-size", "320", "--image-mode", "RGB", *WORKERS]
        ),
        lambda d: d / "out" / "omniglot",
        "interrupted: conversions stopped, staging folders removed; no output changed",
    ),
    "splits.embed": Job(
        "splits.embed",
        lambda w, d: (
            ["--dataset", str(w["toy"]), "--model", str(w["checkpoint"])]
            + ["--output", str(d / "emb.npz"), "--no-progress", *WORKERS]
        ),
        lambda d: d / "emb.npz",
        "interrupted: embed job stopped; ",
    ),
    "beam_pipelines.cache": Job(
        "beam_pipelines.cache",
        lambda w, d: ["--dataset", str(w["toy"]), "--cache-root", str(d), *WORKERS],
        lambda d: d / "toy" / "decoded_84x84",
        "interrupted: cache job stopped and its staging folder removed; ",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(JOBS))
def test_sigterm_then_kill_9_of_a_beam_job_leave_nothing_after_the_next_run(name, work, tmp_path):
    job = JOBS[name]
    target = job.target(tmp_path)
    staging = lambda: [n for n in _hidden_beside(target) if ".tmp-" in n]  # noqa: E731
    for stop in (signal.SIGTERM, signal.SIGKILL):
        proc = _start(job.module, *job.args(work, tmp_path))
        _wait_for(staging, "the staging folder", proc)
        time.sleep(1.0)  # the pipeline's workers at work (each of these jobs runs 5+ s)
        workers = descendant_pids(proc.pid)
        assert proc.poll() is None, f"{name} ended early"
        os.kill(proc.pid, stop)  # as `timeout` sends it: the command's process only
        stdout, stderr = proc.communicate(timeout=STOPS_WITHIN_S)
        _wait_gone(workers)
        if stop == signal.SIGTERM:
            assert proc.returncode == EXIT_TERMINATED, stderr
            said = _said(stdout, stderr)
            assert len(said) == 1 and said[0].startswith(job.stopped), said
            assert _hidden_beside(target) == [] and not target.exists()
            made = target.parent != tmp_path and target.parent.is_dir()
            assert not made or any(target.parent.iterdir()), f"empty {target.parent} left"
    left = staging()
    assert len(left) == 1  # what kill -9 left (and its lock file, held by nobody)
    flags = job.args(work, tmp_path)
    in_process = flags[: -len(WORKERS)] + [WORKERS[0], "1"]  # WORKERS come last
    again = python_m(job.module, *in_process)  # one worker (in-process) spares a start-up
    assert again.returncode == 0, again.stderr
    assert f"removed {target.parent / left[0]}: left by " in again.stderr
    assert _hidden_beside(target) == [] and target.exists()


def _train_args(dataset: Path, run: Path, episodes: int) -> list[str]:
    return [
        "--method", "protonet", "--dataset", str(dataset), "--steps", str(episodes),
        "--checkpoint-every", "2", "--validation-episodes", "0", "--loader-workers", "2",
        "--ways", "5", "--shots", "1", "--query", "2", "--output", str(run), *TINY,
    ]  # fmt: skip


def _newest_step(run: Path) -> int:
    return max((int(p.stem[5:]) for p in (run / "checkpoints").glob("step_*.pt")), default=0)


@pytest.mark.slow
def test_train_with_loader_workers_then_evaluate_under_sigterm_and_kill_9(work, tmp_path):
    """Train's DataLoader workers end with it however it ends (kill -9 included: they watch
    the training process, the forkserver they hang from would keep them); the lock kill -9
    leaves in the run folder bothers neither evaluate nor report; an evaluation stopped by
    SIGTERM writes nothing, and what one killed while writing left goes with the next one."""
    run = tmp_path / "run"
    for stop in (signal.SIGTERM, signal.SIGKILL):
        proc = _start("learners.train", *_train_args(work["toy"], run, 10**6))
        newest = _newest_step(run)
        _wait_for(lambda n=newest: _newest_step(run) > n, "a new snapshot", proc)
        workers = descendant_pids(proc.pid)
        assert len(workers) >= 2  # the loader workers (and the forkserver they come from)
        os.kill(proc.pid, stop)
        _, stderr = proc.communicate(timeout=STOPS_WITHIN_S)
        _wait_gone(workers)
        if stop == signal.SIGTERM:
            assert proc.returncode == EXIT_TERMINATED, stderr
            said = _said("", stderr)
            assert len(said) == 1 and said[0].startswith(f"interrupted ({run}: last checkpoint")
            assert not (run / ".lock").exists()
    assert (run / ".lock").exists()  # kill -9 left it, held by nobody
    log = tmp_path / "evaluate.log"
    with log.open("w") as handle:
        proc = start_python_m(
            "learners.evaluate", "--run", str(run), "--episodes", str(10**6), "--no-hardness",
            stderr=handle,
        )  # fmt: skip
        _wait_for(lambda: "evaluate:" in log.read_text(), "episodes evaluated", proc)
        os.kill(proc.pid, signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=STOPS_WITHIN_S)
    assert proc.returncode == EXIT_TERMINATED, log.read_text()
    assert _said(stdout, log.read_text()) == ["interrupted"]
    assert not (run / "eval").exists()
    out = run / "eval" / "sigterm"
    killed_while_writing = (
        "import os, sys; from pathlib import Path; "
        "from learners.evaluation.evaluation_folder import result_folder\n"
        "with result_folder(Path(sys.argv[1])) as folder:\n"
        "    (folder / 'summary.json').write_text('{')\n"
        "    os._exit(0)"
    )
    dead = subprocess.run([sys.executable, "-c", killed_while_writing, str(out)], cwd=REPO)
    assert dead.returncode == 0 and len(_hidden_beside(out)) == 2  # staging folder, lock
    left = [n for n in _hidden_beside(out) if ".tmp-" in n]
    evaluation = python_m(
        "learners.evaluate", "--run", str(run), "--episodes", "4", "--no-hardness",
        "--no-progress", "--output", str(out),
    )  # fmt: skip
    assert evaluation.returncode == 0, evaluation.stderr
    assert f"removed {out.parent / left[0]}: left by an evaluation" in evaluation.stderr
    assert _hidden_beside(out) == [] and (out / "summary.json").is_file()
    report = python_m("learners.report", "ranks", str(out))
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
    step = _newest_step(run)
    again = python_m("learners.train", *_train_args(work["toy"], run, step + 2))
    assert again.returncode == 0, again.stderr
    assert not (run / ".lock").exists()
    with (run / "train_log.csv").open() as handle:
        steps = [int(line.split(",")[0]) for line in list(handle)[1:]]
    assert steps == list(range(1, step + 3))  # each step once, across three processes


@pytest.mark.slow
def test_sigterm_then_kill_9_of_fetch_leave_nothing_after_the_next_run(s3, work, tmp_path):
    """episodes.fetch stops at once on SIGTERM (the queued copies cancelled, the staging folder
    removed), and the next fetch removes what a killed one left beside its folder."""
    url = "s3://out/sweep/toy"
    s3.upload(work["toy"], url)
    bucket_key = url[len("s3://out/") :]
    blob = os.urandom(2**20) * 24  # objects big enough that the copy takes a few seconds
    for k in range(8):
        s3.client.put_object(Bucket="out", Key=f"{bucket_key}/extra/{k}.bin", Body=blob)
    local = tmp_path / "toy"
    args = ["--dataset", url, "--output", str(local), *s3.flags]
    staging = lambda: [n for n in _hidden_beside(local) if ".tmp-" in n]  # noqa: E731
    for stop in (signal.SIGTERM, signal.SIGKILL):
        proc = _start("episodes.fetch", *args)
        _wait_for(lambda: any(local.parent.glob(f".{local.name}.tmp-*/*")), "copies", proc)
        assert proc.poll() is None, "the fetch ended early"
        os.kill(proc.pid, stop)
        stdout, stderr = proc.communicate(timeout=STOPS_WITHIN_S)
        if stop == signal.SIGTERM:
            assert proc.returncode == EXIT_TERMINATED, stderr
            assert _said(stdout, stderr) == ["interrupted"]
            assert _hidden_beside(local) == [] and not local.exists()
    left = staging()
    assert len(left) == 1
    again = python_m("episodes.fetch", *args)
    assert again.returncode == 0, again.stderr
    assert f"removed {local.parent / left[0]}: left by a fetch" in again.stderr
    assert _hidden_beside(local) == [] and (local / "dataset_spec.json").is_file()
