"""The one training loop for every learner: episodic or batch streams, progress bar,
checkpoints every N steps kept as snapshots, validation hook, bit-exact resume.

Run folder layout:
  checkpoints/step_00001000.pt  snapshots (weights, optimiser, loss-scaler and RNG states,
                                step): all kept, or the `keep_snapshots` newest
  checkpoints/last.pt           the latest snapshot (what a resumed run starts from)
  checkpoints/best.pt           the snapshot with the best validation accuracy so far
  train_log.csv                 step, loss
  validation.csv                step, accuracy, std, ci95, n
last.pt and best.pt are hard links to their snapshot where the filesystem allows (copies
otherwise), so they cost no space and survive the snapshot's pruning. Resuming reloads last.pt
(weights, optimiser state, torch RNG states) and reads the data stream from the next step
index, so an interrupted run ends with the same weights as an uninterrupted one. Validation
runs under a forked RNG and never changes the training trajectory. The loop measures the time
it waits for the next item (`LoopResult.data_wait_s`; the progress bar shows it as a share).
With a step function (`learners.training.meta_batch`) a step trains on `meta_batch` items; under torchrun
rank 0 alone writes, validates and shows progress, and every rank resumes from rank 0's last.pt.
"""

from __future__ import annotations

import csv
import io
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from tqdm import tqdm

from episodes.util.atomic_files import atomic_path
from episodes.util.cli_errors import UserError, interrupt_behind, unwritable_cause
from learners import LearnerConfigError, LearnerInputError
from learners.methods.learner import Learner
from learners.training.distributed import SINGLE_PROCESS, RankInfo, barrier, broadcast_object
from learners.training.loss_watch import LossWatch, chance_loss
from learners.training.run_checkpoints import read_payload, resume_point

if TYPE_CHECKING:  # the validation hook's result (`learners.evaluation`, a layer above)
    from learners.evaluation.metrics import AccuracySummary

__all__ = [
    "BEST",
    "check_loss",
    "CHECKPOINTS",
    "LAST",
    "list_snapshots",
    "load_checkpoint",
    "LoopConfig",
    "LoopResult",
    "NonFiniteLossError",
    "prune_snapshots",
    "run_training",
    "save_checkpoint",
    "snapshot_path",
    "StepFunction",
    "TRAIN_LOG",
    "VALIDATION_FIELDS",
    "VALIDATION_LOG",
]

CHECKPOINTS = "checkpoints"
LAST = "last.pt"
BEST = "best.pt"
TRAIN_LOG = "train_log.csv"
VALIDATION_LOG = "validation.csv"
VALIDATION_FIELDS = ("step", "accuracy", "std", "ci95", "n")


@dataclass(frozen=True)
class LoopConfig:
    total_steps: int
    checkpoint_every: int = 1000
    progress: bool = True
    keep_snapshots: int | None = None  # None: keep every step_N.pt
    meta_batch: int = 1  # stream items per step (this process's share of a meta-batch)

    def __post_init__(self) -> None:
        if self.meta_batch < 1:
            raise LearnerConfigError(f"--meta-batch {self.meta_batch}: expected >= 1")
        if self.total_steps < 1 or self.checkpoint_every < 1:
            raise LearnerConfigError(
                f"steps ({self.total_steps}) and checkpoint interval ({self.checkpoint_every}) "
                "must be >= 1"
            )
        if self.keep_snapshots is not None and self.keep_snapshots < 0:
            raise LearnerConfigError(f"--keep-snapshots {self.keep_snapshots}: expected >= 0")


@dataclass
class LoopResult:
    start_step: int
    end_step: int
    losses: list[float] = field(default_factory=list)
    validation: list[dict[str, float]] = field(default_factory=list)
    data_waits: list[float] = field(default_factory=list)  # per step: waiting for the item
    step_times: list[float] = field(default_factory=list)  # per step: wall time, all included
    loop_s: float = 0.0  # wall time of the session's steps (reading, training, checkpoints, ...)

    @property
    def data_wait_s(self) -> float:
        return sum(self.data_waits)

    @property
    def data_wait_share(self) -> float:
        return self.data_wait_s / self.loop_s if self.loop_s > 0 else 0.0


def snapshot_path(run_dir: str | os.PathLike, step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / f"step_{step:08d}.pt"


def list_snapshots(run_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, path) of every kept snapshot, in step order."""
    folder = Path(run_dir) / CHECKPOINTS
    found = []
    for path in folder.glob("step_*.pt"):
        found.append((int(path.stem.split("_")[1]), path))
    return sorted(found)


def _atomic_save(payload: dict[str, Any], path: Path) -> None:
    # Through a Python file: a full disk is then an OSError (ENOSPC) naming `path`, one line,
    # where torch writing a path itself raises a RuntimeError ("unexpected pos") and a traceback.
    try:
        with atomic_path(path) as tmp, tmp.open("wb") as handle:
            torch.save(payload, handle)
    except RuntimeError as exc:  # torch wraps the OSError when it fails closing the archive
        if interrupt_behind(exc) is not None:  # and a Ctrl-C or SIGTERM that came mid-write
            raise KeyboardInterrupt from None
        cause = unwritable_cause(exc)
        if cause is None:
            raise
        raise OSError(cause.errno, cause.strerror, str(path)) from None


def _atomic_link(source: Path, target: Path) -> None:
    """`target` becomes a hard link to `source` (a copy where links are not supported)."""
    with atomic_path(target) as tmp:
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)


def prune_snapshots(run_dir: str | os.PathLike, keep: int | None) -> list[Path]:
    """Delete all but the `keep` newest step snapshots (None keeps all); returns the deleted.
    last.pt and best.pt are separate directory entries and are never touched."""
    if keep is None:
        return []
    snapshots = list_snapshots(run_dir)
    doomed = [path for _, path in snapshots[: max(0, len(snapshots) - keep)]]
    for path in doomed:
        path.unlink(missing_ok=True)
    return doomed


def save_checkpoint(learner: Learner, step: int, path: Path) -> None:
    """Everything needed to continue bit-exactly: weights, optimiser, RNG states, step."""
    assert learner.optimizer is not None
    payload = {
        "step": step,
        "model": learner.state_dict(),
        "optimizer": learner.optimizer.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "grad_scaler": learner.precision.state_dict(),
        "config": learner.config.to_dict(),
    }
    _atomic_save(payload, path)


def load_checkpoint(
    learner: Learner, path: str | os.PathLike | io.BytesIO, restore_rng: bool = True
) -> int:
    """Load a checkpoint (a file, or its bytes as rank 0 sent them) into `learner`; returns its
    step."""
    if isinstance(path, io.BytesIO):  # bytes rank 0 checked (resume_point)
        payload = torch.load(path, map_location=learner.device, weights_only=True)
    else:
        path = Path(path)
        if not path.is_file():
            raise LearnerInputError(f"checkpoint {path} not found")
        payload = read_payload(path, learner.device)  # a damaged file: one line naming it
    learner.load_state_dict(payload["model"])
    if learner.optimizer is not None and "optimizer" in payload:
        learner.optimizer.load_state_dict(payload["optimizer"])
    learner.precision.load_state_dict(payload.get("grad_scaler", {}))
    if restore_rng:
        torch.set_rng_state(payload["torch_rng"].cpu())
        if payload.get("cuda_rng") and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([s.cpu() for s in payload["cuda_rng"]])
    return int(payload["step"])


def _read_rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _rewrite_rows(path: Path, fields: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    with atomic_path(path) as tmp, tmp.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def _append_rows(path: Path, fields: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    """Add rows as one atomic rewrite: a full disk leaves the log as it was, never a cut row
    (logs are small: a row per step)."""
    old = path.read_text() if path.is_file() else ""
    with atomic_path(path) as tmp, tmp.open("w", newline="") as handle:
        handle.write(old)
        writer = csv.DictWriter(handle, fieldnames=fields)
        if not old:
            writer.writeheader()
        writer.writerows(rows)


def _truncate_logs(run_dir: Path, step: int) -> list[dict[str, str]]:
    """Drop log rows written after the checkpoint we resume from; returns validation rows."""
    if not (run_dir / TRAIN_LOG).is_file() and not (run_dir / VALIDATION_LOG).is_file():
        return []
    train = [r for r in _read_rows(run_dir / TRAIN_LOG) if int(r["step"]) <= step]
    _rewrite_rows(run_dir / TRAIN_LOG, ("step", "loss"), train)
    valid = [r for r in _read_rows(run_dir / VALIDATION_LOG) if int(r["step"]) <= step]
    _rewrite_rows(run_dir / VALIDATION_LOG, VALIDATION_FIELDS, valid)
    return valid


def check_loss(loss: float, step: int, run_dir: Path, learner: Learner) -> None:
    """Stop on a NaN or infinite loss (the weights are gone from then on), naming the step and
    the last good snapshot. fp16 loss scaling skips such steps itself and goes on."""
    if math.isfinite(loss) or learner.precision.mode == "fp16":
        return
    snapshots = list_snapshots(run_dir)
    last = run_dir / CHECKPOINTS / LAST
    good = (
        f"the last good snapshot is {snapshots[-1][1]} (step {snapshots[-1][0]})"
        if snapshots
        else f"the last good checkpoint is {last}"
        if last.is_file()
        else "no snapshot was saved yet"
    )
    raise NonFiniteLossError(
        f"step {step}: the training loss is {loss}; training stopped, {good}: lower --lr (or "
        "check the data) and train again with a new --output"
    )


class NonFiniteLossError(UserError, ValueError):
    """The training loss became NaN or infinite (one line: the step and the last snapshot)."""


def _cuda_devices() -> list[int]:
    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


StepFunction = Callable[[Learner, list[Any], int], float]


def _next_items(items: Iterator[Any], config: LoopConfig, step_fn: StepFunction | None) -> Any:
    """What one step trains on: the next item, or the next `meta_batch` items for `step_fn`."""
    if step_fn is None:
        return next(items)
    return [next(items) for _ in range(config.meta_batch)]


def run_training(
    learner: Learner,
    stream: Callable[[int], Iterator[Any]],
    run_dir: str | os.PathLike,
    config: LoopConfig,
    validate: Callable[[Learner], AccuracySummary] | None = None,
    stop_after: int | None = None,
    step_fn: StepFunction | None = None,
    ranks: RankInfo = SINGLE_PROCESS,
) -> LoopResult:
    """Train `learner` on `stream(start)` items until `config.total_steps`.

    Resumes from the newest intact checkpoint (`last.pt`, else a step snapshot), with the logs
    cut back to its step. `stop_after` ends the session after that global step (an
    interruption, for tests and time-limited jobs). `step_fn(learner, items, step)` trains on
    `config.meta_batch` items per step (a meta-batch, see `learners.training.meta_batch`) instead of
    `learner.train_step` on one; of several ranks, rank 0 alone writes, validates and shows
    progress, and every rank resumes from the checkpoint rank 0 resumes from."""
    if step_fn is None and config.meta_batch != 1:
        raise ValueError(f"a meta-batch of {config.meta_batch} items needs a step function")
    run_dir = Path(run_dir)
    writer = ranks.is_writer
    if writer:
        (run_dir / CHECKPOINTS).mkdir(parents=True, exist_ok=True)
    start = 0
    best = float("-inf")
    last = run_dir / CHECKPOINTS / LAST
    checkpoint: bytes | None = None
    if writer:
        point = resume_point(run_dir / CHECKPOINTS, last)  # the newest intact checkpoint
        if point.note:
            print(point.note, file=sys.stderr)
        checkpoint = point.data  # read once, and loaded as checked
    if ranks.sharded:
        checkpoint = broadcast_object(checkpoint, ranks)  # rank 0's checkpoint on every rank
    if checkpoint is not None:
        start = load_checkpoint(learner, io.BytesIO(checkpoint))
    if writer:
        previous = _truncate_logs(run_dir, start)  # rows after it (or with none) are dropped
        best = max((float(r["accuracy"]) for r in previous), default=float("-inf"))
    result = LoopResult(start_step=start, end_step=start)
    end = config.total_steps if stop_after is None else min(config.total_steps, stop_after)
    if start >= end:
        return result
    bar = tqdm(
        total=config.total_steps,
        initial=start,
        disable=not (config.progress and writer),
        desc=f"train {learner.config.method}",
        unit="step",
        dynamic_ncols=True,
    )
    pending: list[dict[str, Any]] = []
    began = time.time()
    loop_began = time.perf_counter()
    items = stream(start * config.meta_batch)
    watch = LossWatch(learner.config.lr, start)  # one warning when training goes nowhere
    try:
        for step in range(start + 1, end + 1):
            asked = time.perf_counter()
            item = _next_items(items, config, step_fn)
            result.data_waits.append(time.perf_counter() - asked)
            learner.schedule_step(step, config.total_steps)  # learners.optim.lr_schedule
            chance = chance_loss(learner, item) if writer else None
            loss = learner.train_step(item) if step_fn is None else step_fn(learner, item, step)
            del item
            check_loss(loss, step, run_dir, learner)
            warning = watch.observe(step, loss, chance) if writer else None
            if warning is not None:
                bar.write(warning, file=sys.stderr)
            result.losses.append(loss)
            if writer:
                pending.append({"step": step, "loss": f"{loss:.6f}"})
            bar.update(1)
            result.loop_s = time.perf_counter() - loop_began
            bar.set_postfix(loss=f"{loss:.4f}", wait=f"{100 * result.data_wait_share:.0f}%")
            checkpoint = step % config.checkpoint_every == 0 or step == config.total_steps
            if checkpoint and writer:  # rank 0 writes; the others go on to the next step
                _append_rows(run_dir / TRAIN_LOG, ("step", "loss"), pending)
                pending = []
                snapshot = snapshot_path(run_dir, step)
                if validate is not None:
                    with torch.random.fork_rng(devices=_cuda_devices()):
                        summary = validate(learner)
                    row = {
                        "step": step,
                        "accuracy": summary.mean,
                        "std": summary.std,
                        "ci95": summary.ci95,
                        "n": summary.n,
                    }
                    result.validation.append(row)
                    _append_rows(run_dir / VALIDATION_LOG, VALIDATION_FIELDS, [row])
                    bar.write(
                        f"step {step}: validation accuracy {summary.mean:.4f} "
                        f"+- {summary.ci95:.4f} ({time.time() - began:.0f}s)"
                    )
                save_checkpoint(learner, step, snapshot)
                _atomic_link(snapshot, last)
                if validate is not None and result.validation[-1]["accuracy"] > best:
                    best = result.validation[-1]["accuracy"]
                    _atomic_link(snapshot, run_dir / CHECKPOINTS / BEST)
                prune_snapshots(run_dir, config.keep_snapshots)
            result.end_step = step
            result.step_times.append(time.perf_counter() - asked)
    finally:
        result.loop_s = time.perf_counter() - loop_began
        close = getattr(items, "close", None)
        if close is not None:
            close()  # stops a background feed's workers, also on Ctrl-C and errors
        bar.close()
    barrier(ranks)  # the others wait for rank 0's last checkpoint before ending
    return result
