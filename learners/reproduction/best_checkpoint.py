"""The checkpoint a later stage starts from or evaluates: a training run's best-validation
snapshot, checked against the run's own validation log, or its last one when it was not validated.

learners.train keeps `checkpoints/best.pt` (the first snapshot of the highest validation
accuracy) and logs every validation in `validation.csv` (step, accuracy, std, ci95, n); here the
log's best step is found again and `best.pt` is checked to be that step's snapshot, so a later
stage never starts from a checkpoint other than the one the record names."""

from __future__ import annotations

import csv
import filecmp
import json
from pathlib import Path
from typing import Any

from episodes.util.cli_errors import UserError

__all__ = [
    "best_validation_step",
    "CheckpointError",
    "CHECKPOINTS",
    "pick_checkpoint",
    "snapshot_name",
    "VALIDATION_LOG",
]

VALIDATION_LOG = "validation.csv"  # learners.train's validation log in a run folder
CHECKPOINTS = "checkpoints"


class CheckpointError(UserError):
    """A run folder whose checkpoints do not match its validation log."""


def best_validation_step(rows: list[dict[str, str]]) -> tuple[int, float, float | None]:
    """(step, accuracy, ci95) of the first row with the highest accuracy, as learners.train
    keeps best.pt (a later snapshot replaces it only when strictly better)."""
    if not rows:
        raise ValueError("no validation rows")
    best = rows[0]
    for row in rows[1:]:
        if float(row["accuracy"]) > float(best["accuracy"]):
            best = row
    ci = best.get("ci95")
    return int(best["step"]), float(best["accuracy"]), float(ci) if ci else None


def snapshot_name(step: int) -> str:
    """learners.train's name of the snapshot kept at `step`."""
    return f"step_{step:08d}.pt"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b) or filecmp.cmp(a, b, shallow=False)
    except OSError:
        return False


def pick_checkpoint(run: Path, choose: str) -> dict[str, Any]:
    """The checkpoint `choose` ('best' or 'last') of `run`, with its step and validation
    accuracy; a missing file or a best.pt that is not the log's best snapshot is refused."""
    checkpoints = run / CHECKPOINTS
    if choose == "last":
        last = checkpoints / "last.pt"
        if not last.is_file():
            raise CheckpointError(f"{last}: missing; the training stage did not finish")
        steps = json.loads((run / "config.json").read_text()).get("total_steps")
        return {"checkpoint": str(last), "chosen": "last", "step": steps}
    log = run / VALIDATION_LOG
    try:
        with log.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
    except FileNotFoundError:
        raise CheckpointError(f"{log}: missing; the run was not validated") from None
    try:
        step, accuracy, ci95 = best_validation_step(rows)
    except (ValueError, KeyError) as exc:
        raise CheckpointError(f"{log}: no usable validation rows ({exc})") from None
    best = checkpoints / "best.pt"
    if not best.is_file():
        raise CheckpointError(f"{best}: missing although {log} has validation rows")
    snapshot = checkpoints / snapshot_name(step)
    if snapshot.is_file() and not _same_file(best, snapshot):
        raise CheckpointError(
            f"{best} is not the snapshot of step {step} ({snapshot}), the best validation "
            f"accuracy of {log}; the run folder was changed after training"
        )
    return {
        "checkpoint": str(best),
        "chosen": "best",
        "step": step,
        "validation_accuracy": accuracy,
        "validation_ci95": ci95,
        "validations": len(rows),
    }
