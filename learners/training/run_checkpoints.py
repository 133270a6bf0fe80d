"""Which checkpoint a run continues from, and one line for a damaged one.

A run resumes from its newest intact checkpoint: `last.pt`, or a step snapshot when `last.pt`
is missing (deleted), damaged (a cut copy, a bad disk) or older than a snapshot (stopped between
saving the snapshot and linking it). A checkpoint that cannot be read ends in one line naming
the file and the newest intact snapshot; never torch's advice to load it with
`weights_only=False`, which would run whatever code the file holds.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from episodes.util.cli_errors import UserError

__all__ = [
    "CheckpointDamagedError",
    "damaged_line",
    "intact_step",
    "newest_intact_snapshot",
    "read_payload",
    "resume_point",
    "ResumePoint",
]


class CheckpointDamagedError(UserError, ValueError):
    """A checkpoint file that cannot be read back (its message is the one line to print)."""


def _snapshots(folder: Path) -> list[tuple[int, Path]]:
    found = []
    for path in folder.glob("step_*.pt"):
        try:
            found.append((int(path.stem.split("_")[1]), path))
        except (IndexError, ValueError):  # step_final.pt and the like: not ours
            continue
    return sorted(found)


def _load(path: Path | io.BytesIO, map_location: Any) -> tuple[dict[str, Any] | None, str]:
    """(payload, "") or (None, why it cannot be read); weights only, never code."""
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:  # zip, pickle and EOF errors alike: the file is damaged
        return None, type(exc).__name__
    if not isinstance(payload, dict) or "model" not in payload or "step" not in payload:
        return None, "no model weights or step in it"
    return payload, ""


def read_payload(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """The payload of a training checkpoint, or CheckpointDamagedError naming the file and
    the newest intact snapshot beside it."""
    path = Path(path)
    payload, why = _load(path, map_location)
    if payload is None:
        raise CheckpointDamagedError(damaged_line(path, why))
    return payload


def intact_step(path: Path) -> int | None:
    """The step of a readable checkpoint; None when it is missing or damaged."""
    return _intact(path)[0]


def _intact(path: Path) -> tuple[int | None, bytes]:
    """(step, the file's bytes) of a readable checkpoint, read once; (None, b"") when it is
    missing or damaged."""
    try:
        data = path.read_bytes()
        payload, _ = _load(io.BytesIO(data), "cpu")
        return (None, b"") if payload is None else (int(payload["step"]), data)
    except (OSError, TypeError, ValueError):
        return None, b""


def newest_intact_snapshot(folder: Path, below: int | None = None) -> tuple[int, Path] | None:
    """(step, path) of the newest readable step snapshot in `folder` (below step `below`)."""
    for step, path in reversed(_snapshots(folder)):
        if below is not None and step >= below:
            continue
        if intact_step(path) == step:
            return step, path
    return None


def damaged_line(path: Path, why: str) -> str:
    """'<file>: damaged checkpoint (<why>); the newest intact snapshot is <snapshot> (step N)'."""
    found = newest_intact_snapshot(path.parent)
    if found is not None and found[1] != path:
        advice = f"the newest intact snapshot is {found[1]} (step {found[0]})"
    else:
        advice = f"no intact snapshot in {path.parent}"
    return f"{path}: damaged checkpoint, cannot be read ({why}); {advice}"


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint a run continues from: its file (None: start at step 0), the bytes that
    were checked (loaded as they are, so the file is read once and what was checked is what
    is loaded), and a note line when it is not `last.pt`."""

    path: Path | None = None
    data: bytes | None = None
    note: str | None = None


def resume_point(folder: Path, last: Path) -> ResumePoint:
    """The newest intact checkpoint of a run (`last`, or a newer intact step snapshot in
    `folder`). Raises CheckpointDamagedError when checkpoints exist but none is intact."""
    last_step, last_data = _intact(last) if last.is_file() else (None, b"")
    snapshots = _snapshots(folder)
    newer = [(s, p) for s, p in reversed(snapshots) if last_step is None or s > last_step]
    for step, path in newer:
        found, data = _intact(path)
        if found == step:
            why = (
                "missing"
                if not last.is_file()
                else "damaged"
                if last_step is None
                else f"at step {last_step}"
            )
            return ResumePoint(
                path, data, f"note: {last} is {why}; resuming from {path} (step {step})"
            )
    if last_step is not None:
        return ResumePoint(last, last_data)
    if last.is_file() or snapshots:
        damaged = last if last.is_file() else snapshots[-1][1]
        raise CheckpointDamagedError(
            f"{damaged}: damaged checkpoint, cannot be read, and no intact snapshot in {folder}: "
            "train again with a new --output"
        )
    return ResumePoint()
