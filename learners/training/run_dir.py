"""A training run's folder: its `config.json` (learner, data and loop options) and how to
rebuild the learner of a run and load one of its checkpoints.

config.json's "learner" holds the options every method shares and, under "options", the
method's own; runs saved before hold every method's options side by side in "learner" and
still resume and evaluate (`learners.methods.registry.learner_config_from_dict` reads both)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from episodes.util.atomic_files import write_text_atomically
from episodes.util.cli_errors import UserError
from episodes.util.folder_lock import FolderLock, FolderLockedError, acquire_folder_lock
from episodes.util.json_files import read_json_object
from learners import LearnerConfigError, LearnerInputError
from learners.feed.episode_source import EpisodeOptions
from learners.methods.learner import Learner
from learners.methods.learner_config import LearnerConfig
from learners.methods.registry import (
    build_learner,
    foreign_options_message,
    learner_config_from_dict,
    method_entry,
    resolved_config,
    unfixed_method,
)
from learners.training.training_loop import BEST, CHECKPOINTS, LAST, list_snapshots, load_checkpoint

__all__ = [
    "changed_values",
    "checkpoint_path",
    "CONFIG",
    "load_run_learner",
    "lock_run_folder",
    "overridden_config",
    "read_run_config",
    "RESUMABLE_CHANGES",
    "RUN_LOCK",
    "RunConfig",
    "RunFolderError",
    "write_or_check_run_config",
]

CONFIG = "config.json"
RUN_LOCK = ".lock"  # held while learners.train writes the run
# Options that may change when a run is continued: training longer, options that do not
# change results (how data is loaded, how many snapshots are kept), and the two that change
# only rounding, never which items are drawn nor their labels: the device, and the device
# decoding JPEG records (nvJPEG's pixels differ slightly from the reference decoder's), so a
# run started on a GPU machine resumes on another machine.
RESUMABLE_CHANGES = (
    "total_steps",
    "epochs",
    "device",
    "progress",
    "loader_workers",
    "decode_processes",
    "keep_snapshots",
    "decode_device",
)


@dataclass
class RunConfig:
    learner: LearnerConfig
    dataset: str
    split_file: str | None
    episode_options: EpisodeOptions
    seed: int = 0
    total_steps: int = 1000
    checkpoint_every: int = 1000
    epochs: int | None = None  # the length in epochs (learners.training.run_length), if given
    validation_episodes: int = 100
    batch_size: int = 64
    global_meta_batch: int = 1  # items per optimiser step, all ranks together (--meta-batch x W)
    # Loading and storage (results do not depend on them).
    loader_workers: int = 0
    decode_processes: int = 0
    keep_snapshots: int | None = None
    decode_device: str = "cpu"  # "cuda": JPEG records decoded on the GPU (pixels differ slightly)
    # Numerics (results depend on them).
    amp: str = "off"
    channels_last: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["learner"] = self.learner.to_dict()
        values["episode_options"] = self.episode_options.to_dict()
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunConfig:
        values = dict(values)
        values["learner"] = learner_config_from_dict(values["learner"])
        values["episode_options"] = EpisodeOptions(**values["episode_options"])
        return cls(**values)


class RunFolderError(UserError, ValueError):
    """A run folder's config.json that cannot be read back (truncated, or not written by
    learners.train); the message names the file."""


def _load_config(path: Path) -> RunConfig:
    """The RunConfig in the config.json `path`, or RunFolderError naming it."""
    values = read_json_object(path, RunFolderError)
    try:
        return RunConfig.from_dict(values)
    except (KeyError, TypeError) as exc:  # a field missing or of another shape
        raise RunFolderError(
            f"{path}: not a learners.train config.json ({type(exc).__name__}: {exc})"
        ) from exc


def read_run_config(run_dir: str | os.PathLike) -> RunConfig:
    path = Path(run_dir) / CONFIG
    if not path.is_file():
        raise LearnerInputError(f"--run {run_dir}: no {CONFIG} (not a learners.train run folder)")
    return _load_config(path)


def lock_run_folder(run_dir: str | os.PathLike) -> FolderLock:
    """One learners.train per run folder: a second one on the same --output is refused with
    one line naming the running one (`RUN_LOCK` inside the folder; the kernel frees it when
    the process ends in any way, and the next run removes a file kill -9 left)."""
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    try:
        return acquire_folder_lock(
            run / RUN_LOCK,
            run,
            "{folder}: another learners.train is training this run ({holder}); wait for it to "
            "finish or choose another --output",
        )
    except FolderLockedError as exc:
        raise UserError(str(exc)) from None


def changed_values(old: Any, new: Any, prefix: str = "") -> list[str]:
    """'name old -> new' for every value that differs, nested dicts by dotted name."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            name = f"{prefix}.{key}" if prefix else str(key)
            found += changed_values(old.get(key), new.get(key), name)
        return found
    return [] if old == new else [f"{prefix} {old!r} -> {new!r}"]


def write_or_check_run_config(run_dir: str | os.PathLike, config: RunConfig) -> None:
    """Write config.json for a new run; for an existing run, refuse changed options (configs
    saved before names and defaults were resolved compare by what they run), naming each
    changed value (`learner.lr 0.01 -> 0.001`)."""
    path = Path(run_dir) / CONFIG
    new = config.to_dict()
    if path.is_file():
        old = _load_config(path)
        old.learner = resolved_config(old.learner)
        old_values = old.to_dict()
        changed = [
            line
            for k in sorted(set(old_values) | set(new))
            if k not in RESUMABLE_CHANGES
            for line in changed_values(old_values.get(k), new.get(k), k)
        ]
        if changed:
            raise LearnerConfigError(
                f"{path} exists with different options ({'; '.join(changed)}): use a new "
                "--output folder or the same options to resume"
            )
    write_text_atomically(path, json.dumps(new, indent=2, sort_keys=True) + "\n")


def overridden_config(config: LearnerConfig, overrides: dict[str, Any]) -> LearnerConfig:
    """`config` with some of the method's options replaced; a name that fixes an overridden
    option (`knn` fixes the inference) gives way to the same learner with nothing fixed."""
    if not overrides:
        return config
    config = resolved_config(config)
    assert config.options is not None
    method = config.method
    foreign = sorted(set(overrides) - set(config.options.__dataclass_fields__))
    if foreign:
        raise LearnerConfigError(foreign_options_message(foreign, method))
    if set(overrides) & set(method_entry(method).fixed):
        method = unfixed_method(method)
    return replace(config, method=method, options=replace(config.options, **overrides))


def checkpoint_path(run_dir: str | os.PathLike, which: str) -> Path:
    """'last', 'best' or 'step_N' (or N) -> the checkpoint file of the run."""
    folder = Path(run_dir) / CHECKPOINTS
    if which in ("last", "best"):
        path = folder / (LAST if which == "last" else BEST)
    else:
        step = int(which.removeprefix("step_"))
        matches = [p for s, p in list_snapshots(run_dir) if s == step]
        path = matches[0] if matches else folder / f"step_{step:08d}.pt"
    if not path.is_file():
        raise LearnerInputError(f"checkpoint {which!r} of run {run_dir}: {path} not found")
    return path


def load_run_learner(
    run_dir: str | os.PathLike,
    which: str,
    device: torch.device,
    overrides: dict[str, Any] | None = None,
) -> tuple[Learner, RunConfig, int]:
    """Rebuild the run's learner on `device` (with optional overrides of the method's options,
    e.g. another inference), load checkpoint `which`; returns (learner, run config, step)."""
    config = read_run_config(run_dir)
    learner = build_learner(overridden_config(config.learner, overrides or {})).to(device)
    step = load_checkpoint(learner, checkpoint_path(run_dir, which), restore_rng=False)
    return learner, config, step
