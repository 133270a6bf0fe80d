"""Runs a plan's stages in order, each in its folder under --output, and keeps `stage.json`.

A finished stage is verified (its outputs exist, its recorded command is the planned one) and
skipped. An interrupted or failed stage runs again with the same command: learners.train
resumes from its last checkpoint by itself. A stage whose recorded command differs from the
plan's is refused before any stage runs (the folder holds another experiment). Each command
runs as a child process (`python -m ...`, its output in the stage's output.log) that is ended
with SIGTERM when this process dies, even by kill -9, so no orphan keeps training."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from episodes.util.cli_errors import UserError
from learners.reproduction.best_checkpoint import pick_checkpoint
from learners.reproduction.stage_records import (
    FAILED,
    FINISHED,
    RUNNING,
    StageRecord,
    now,
    read_record,
    write_record,
)
from learners.reproduction.stages import LOG, RECORD, Stage, comparable, first_difference
from learners.reproduction.train_and_valid_split import (
    lists_of_dataset_spec,
    lists_of_split_file,
    write_train_and_valid_split,
)

__all__ = [
    "check_recorded_commands",
    "child_environment",
    "DONE",
    "IN_PROCESS",
    "LEFTOVER_WAIT_S",
    "NOT_RUN",
    "Outcome",
    "RAN",
    "REPO_ROOT",
    "run_stages",
    "Say",
    "SKIPPED",
    "StageConflict",
    "STOP_GRACE_S",
    "verify",
]

# Outcomes of a stage in one run of the plan.
SKIPPED = "skipped"  # finished in an earlier run, verified
RAN = "finished"
NOT_RUN = "not run"  # a stage it needs did not finish
DONE = (SKIPPED, RAN)

REPO_ROOT = Path(__file__).resolve().parents[2]  # the children import this checkout's code
LEFTOVER_WAIT_S = 120.0  # how long a rerun waits for a killed run's child to end
STOP_GRACE_S = 60.0  # how long a child may take to stop after SIGTERM


class StageConflict(UserError):
    """A stage folder recorded with another command than the plan's."""


@dataclass
class Outcome:
    status: str
    note: str = ""
    record: StageRecord | None = None


Say = Callable[[str], None]


def check_recorded_commands(stages: Sequence[Stage], out: Path) -> None:
    """Refuse, before any work, a stage folder whose recorded command is not the planned one."""
    for stage in stages:
        record = read_record(stage.folder(out))
        if record is None:
            continue
        recorded, planned = comparable(record.command), comparable(stage.command)
        if recorded != planned:
            raise StageConflict(
                f"{stage.folder(out)} was run with another command than this plan's "
                f"({first_difference(recorded, planned)}); choose another --output, or remove "
                "that folder to run the stage again"
            )


def run_stages(stages: Sequence[Stage], out: Path, say: Say) -> dict[str, Outcome]:
    """Run (or skip) every stage in order; the outcome of each, by stage name."""
    outcomes: dict[str, Outcome] = {}
    for index, stage in enumerate(stages, 1):
        head = f"[{index}/{len(stages)}] {stage.name}"
        folder = stage.folder(out)
        previous = read_record(folder)
        blocked = [n for n in stage.needs if outcomes[n].status not in DONE]
        if blocked:
            outcomes[stage.name] = Outcome(NOT_RUN, f"needs {', '.join(blocked)}", previous)
            say(f"{head}: not run (needs {', '.join(blocked)}, which did not finish)")
            continue
        if previous is not None and previous.status == FINISHED:
            problem = verify(stage, folder, previous)
            if problem is None:
                outcomes[stage.name] = Outcome(SKIPPED, "finished earlier", previous)
                say(f"{head}: finished earlier ({previous.ended}), verified, skipped")
                rerun = [n for n in stage.needs if outcomes[n].status == RAN]
                if rerun:
                    say(
                        f"{head}: note: it was made from {', '.join(rerun)}, which ran again "
                        f"now; remove {folder} and run again to redo it from the new outputs"
                    )
                continue
            say(f"{head}: finished earlier, but {problem}; running it again")
        elif previous is not None and previous.status == RUNNING:
            say(f"{head}: interrupted earlier; running it again with the same command")
            _wait_for_leftover(stage, previous)
        elif previous is not None and previous.status == FAILED:
            say(f"{head}: failed earlier (exit {previous.exit_code}); running it again")
        else:
            say(f"{head}: {stage.about}")
        outcomes[stage.name] = _run_one(stage, folder, previous, say, head)
    return outcomes


def verify(stage: Stage, folder: Path, record: StageRecord) -> str | None:
    """Why a stage recorded as finished is not (a missing output, a short evaluation), or None."""
    for output in stage.outputs:
        if not (folder / output).exists():
            return f"{folder / output} is missing"
    checkpoint = record.result.get("checkpoint")
    if stage.kind == "best" and (not checkpoint or not Path(checkpoint).is_file()):
        return f"its checkpoint {checkpoint} is missing"
    if stage.kind == "evaluate" and stage.episodes is not None:
        try:
            n = json.loads((folder / "eval" / "summary.json").read_text())["accuracy"]["n"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return f"{folder / 'eval' / 'summary.json'} is unreadable ({exc})"
        if n != stage.episodes:
            return f"{folder / 'eval' / 'summary.json'} counts {n} episodes, not {stage.episodes}"
    return None


def _run_one(
    stage: Stage, folder: Path, previous: StageRecord | None, say: Say, head: str
) -> Outcome:
    record = StageRecord.starting(stage, previous)
    if stage.fresh and folder.exists():
        _clear(folder)
    write_record(folder, record)
    try:
        if stage.in_process:
            result = IN_PROCESS[stage.command[0]](_pairs(stage.command[1:]))
        else:
            code = _run_child(stage, folder, record)
            if code != 0:
                return _failed(stage, folder, record, code, _log_tail(folder), say, head)
            problem = verify(stage, folder, record)
            if problem is not None:
                return _failed(stage, folder, record, 0, problem, say, head)
            result = _result(stage, folder)
    except UserError as exc:
        return _failed(stage, folder, record, None, str(exc), say, head)
    record.status, record.result, record.ended, record.pid = FINISHED, result, now(), None
    record.exit_code = 0
    write_record(folder, record)
    say(f"{head}: finished{_summary(result)}")
    return Outcome(RAN, "", record)


def _failed(stage, folder, record, code, why: str, say: Say, head: str) -> Outcome:
    record.status, record.exit_code, record.ended, record.pid = FAILED, code, now(), None
    record.result = {"error": why}
    write_record(folder, record)
    where = "" if stage.in_process else f"; its output: {folder / LOG}"
    say(f"{head}: failed{f' (exit {code})' if code else ''}: {why}{where}")
    return Outcome(FAILED, why, record)


def _summary(result: dict[str, Any]) -> str:
    if "mean" in result:
        return f": {100 * result['mean']:.2f}% +- {100 * result['ci95']:.2f} (n={result['n']})"
    if "step" in result:
        return f": {result['chosen']}.pt, step {result['step']}"
    return ""


def _clear(folder: Path) -> None:
    """Remove what an unfinished run of a `fresh` stage left, its record and log aside."""
    for path in folder.iterdir():
        if path.name in (RECORD, LOG):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _pairs(arguments: Sequence[str]) -> dict[str, str]:
    return dict(zip(arguments[::2], arguments[1::2]))


def _pick(arguments: dict[str, str]) -> dict[str, Any]:
    return pick_checkpoint(Path(arguments["--run"]), arguments["--choose"])


def _train_and_valid(arguments: dict[str, str]) -> dict[str, Any]:
    if "--split-file" in arguments:
        path = Path(arguments["--split-file"])
        lists, dataset = lists_of_split_file(path), json.loads(path.read_text()).get("dataset")
    else:
        folder = Path(arguments["--dataset"])
        lists, dataset = lists_of_dataset_spec(folder), folder.name
    sizes = write_train_and_valid_split(lists, dataset or "", Path(arguments["--output"]))
    return {"split_file": arguments["--output"], "classes": sizes}


IN_PROCESS: dict[str, Callable[[dict[str, str]], dict[str, Any]]] = {
    "pick-checkpoint": _pick,
    "train-and-valid-split": _train_and_valid,
}


def _result(stage: Stage, folder: Path) -> dict[str, Any]:
    """What a finished child stage produced, for the record and the report."""
    if stage.kind == "evaluate":
        summary = json.loads((folder / "eval" / "summary.json").read_text())
        return {"summary": str(folder / "eval" / "summary.json"), **summary["accuracy"]}
    if stage.kind == "train":
        config = json.loads((folder / "run" / "config.json").read_text())
        return {"run": str(folder / "run"), "steps": config.get("total_steps")}
    return {"outputs": [str(folder / output) for output in stage.outputs]}


def child_environment() -> dict[str, str]:
    """This environment, with this checkout first on the children's import path."""
    paths = [str(REPO_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def _ended_with_parent(parent: int) -> Callable[[], None]:
    """For Popen's preexec_fn: the child gets SIGTERM when `parent` dies (Linux prctl
    PR_SET_PDEATHSIG), and ends at once if the parent died before that was set."""

    def arrange() -> None:
        if sys.platform.startswith("linux"):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return arrange


def _run_child(stage: Stage, folder: Path, record: StageRecord) -> int:
    """Run the stage's command to its end; its exit status. Ctrl-C or SIGTERM here stops it
    (SIGTERM, then SIGKILL after STOP_GRACE_S) and is raised again."""
    with (folder / LOG).open("a") as log:
        log.write(f"\n=== {now()} attempt {record.attempts}: {stage.shown()}\n")
        log.flush()
        child = subprocess.Popen(
            [sys.executable, "-m", *stage.command],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_environment(),
            preexec_fn=_ended_with_parent(os.getpid()),
        )
        record.pid = child.pid
        write_record(folder, record)
        try:
            return child.wait()
        except KeyboardInterrupt:
            _stop(child)
            raise


def _stop(child: subprocess.Popen) -> None:
    """End a child that a Ctrl-C may already be ending: SIGTERM, then SIGKILL if it lingers."""
    try:
        child.wait(timeout=5)
        return
    except subprocess.TimeoutExpired:
        pass
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _alive(pid: int, module: str) -> bool:
    """Whether process `pid` still runs `module` (a killed run's child, not a reused pid)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return module.encode() in command


def _wait_for_leftover(stage: Stage, record: StageRecord) -> None:
    """A reproduction killed outright leaves its child ending (SIGTERM): wait for it, so the
    rerun does not start a second writer of the same run folder."""
    if record.pid is None or stage.in_process:
        return
    deadline = time.monotonic() + LEFTOVER_WAIT_S
    while _alive(record.pid, stage.command[0]):
        if time.monotonic() > deadline:
            raise UserError(
                f"stage {stage.name}: its earlier process (pid {record.pid}) still runs "
                f"{stage.command[0]}; stop it, then run this command again"
            )
        time.sleep(0.2)


def _log_tail(folder: Path, lines: int = 3) -> str:
    """What the stage's last attempt said last: its `error:` line, else its last lines."""
    try:
        text = (folder / LOG).read_text(errors="replace").split("\n=== ")[-1].splitlines()[1:]
    except OSError:
        return "no output"
    said = [line.strip() for line in text if line.strip()]
    errors = [line for line in said if line.startswith("error:")]
    return errors[-1] if errors else " | ".join(said[-lines:]) or "no output"
