"""`stage.json`, the record each stage folder keeps: the command it runs, whether it is running,
finished or failed, and its result. Written atomically, so a kill leaves the previous record."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from episodes.util.atomic_files import write_text_atomically
from episodes.util.cli_errors import UserError
from learners.reproduction.stages import RECORD, Stage

__all__ = ["FAILED", "FINISHED", "now", "read_record", "RUNNING", "StageRecord", "write_record"]

RUNNING = "running"
FINISHED = "finished"
FAILED = "failed"


@dataclass
class StageRecord:
    """What `stage.json` holds."""

    stage: str
    kind: str
    command: list[str]
    shown: str
    status: str
    attempts: int = 0
    started: str | None = None
    ended: str | None = None
    pid: int | None = None  # the child process while the stage runs
    exit_code: int | None = None
    result: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def starting(cls, stage: Stage, previous: StageRecord | None) -> StageRecord:
        return cls(
            stage=stage.name,
            kind=stage.kind,
            command=list(stage.command),
            shown=stage.shown(),
            status=RUNNING,
            attempts=(previous.attempts if previous else 0) + 1,
            started=now(),
        )


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def read_record(folder: Path) -> StageRecord | None:
    """The stage's record, None when the folder has none; a record that is not one is refused."""
    path = folder / RECORD
    if not path.is_file():
        return None
    try:
        values = json.loads(path.read_text())
        return StageRecord(**values)
    except (ValueError, TypeError) as exc:
        raise UserError(
            f"{path}: not a stage record of learners.reproduce ({exc}); move that folder away "
            "or choose another --output"
        ) from None


def write_record(folder: Path, record: StageRecord) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomically(folder / RECORD, json.dumps(asdict(record), indent=2) + "\n")
