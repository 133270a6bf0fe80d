"""A stage of a reproduction: one command line (`python -m MODULE ...`, run as a child process)
or one small in-process step, with its folder under `--output`, the stages it needs and the
files that show it finished."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "comparable",
    "ENVIRONMENT_FLAGS",
    "first_difference",
    "LOG",
    "RECORD",
    "RENAMED_FLAGS",
    "Stage",
]

# Flags whose value may change between two runs of a stage without changing what it computes
# (learners.train lets a run resume on another device): left out when commands are compared.
ENVIRONMENT_FLAGS = ("--device",)

RECORD = "stage.json"  # in each stage folder: the command, its status and its result
LOG = "output.log"  # in each stage folder: what the stage's command printed


@dataclass(frozen=True)
class Stage:
    """One step of a plan. `command` is `(MODULE, ARG...)` for a child stage, or
    `(STEP, ARG...)` for an in-process one (`in_process`), compared as recorded on resume."""

    name: str  # the stage's folder under --output
    kind: str  # train, best, evaluate, split, embed
    command: tuple[str, ...]
    needs: tuple[str, ...] = ()  # stages whose outputs this one reads
    outputs: tuple[str, ...] = ()  # files (relative to the stage folder) a finished stage has
    in_process: bool = False
    fresh: bool = False  # an unfinished run's outputs are removed first (commands that refuse them)
    episodes: int | None = None  # evaluate: the episodes its summary.json must count
    about: str = ""  # what it does, one line (dry-run, log)

    def folder(self, out: Path) -> Path:
        return out / self.name

    def shown(self) -> str:
        """The command as a user would type it."""
        if self.in_process:
            return f"(in-process) {shlex.join(self.command)}"
        return f"python -m {shlex.join(self.command)}"


# Flags renamed since a plan may have been recorded (module -> old -> new): a recorded command
# with the old spelling compares equal to the planned one (its run goes on, not over again).
RENAMED_FLAGS = {"learners.train": {"--episodes": "--steps"}}


def comparable(command: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """`command` without the ENVIRONMENT_FLAGS and their values, old spellings of RENAMED_FLAGS
    in their current form."""
    renamed = RENAMED_FLAGS.get(command[0], {}) if command else {}
    command = [renamed.get(token, token) for token in command]
    kept: list[str] = []
    skip = False
    for token in command:
        if skip:
            skip = False
            continue
        if token in ENVIRONMENT_FLAGS:
            skip = True
            continue
        kept.append(token)
    return tuple(kept)


def first_difference(recorded: tuple[str, ...], planned: tuple[str, ...]) -> str:
    """Where two commands part, in words: 'recorded `--steps 6`, planned `--steps 75000`'."""
    for index, (old, new) in enumerate(zip(recorded, planned)):
        if old != new:
            return (
                f"recorded `{shlex.join(recorded[index : index + 2])}`, "
                f"planned `{shlex.join(planned[index : index + 2])}`"
            )
    if len(recorded) > len(planned):
        return f"recorded also `{shlex.join(recorded[len(planned) :])}`"
    return f"planned also `{shlex.join(planned[len(recorded) :])}`"
