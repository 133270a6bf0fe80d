"""`learners.train --init-from CHECKPOINT`: a new run's backbone starts from another run's.

Meta-Dataset lets every learner start its embedding network from the weights a pre-training
run converged to on ImageNet instead of from scratch (Triantafillou et al. 2020, sec. 4
"Pre-training"; the reference's `Learner.pretrained_checkpoint`, the best-validation checkpoint
of `pretrain_imagenet_resnet.gin` or `_convnet.gin`, pretrained_resnet.gin@87a478a1:3): train
it (`--recipe meta_dataset/pretrain_resnet18`, `pretrain_convnet` or `pretrain_wide_resnet`),
then pass its run folder, of which the best-validation checkpoint (`checkpoints/best.pt`) is
taken when the run validated and `checkpoints/last.pt` otherwise (a line says which file and
step), or any checkpoint file, taken as given. Only the backbone is taken: a method's own modules (heads, relation module)
start fresh. Parameters must match name for name and shape for shape; BatchNorm's running
statistics are taken where this run keeps them (a run with support-set or episode BatchNorm
keeps none, as Meta-Dataset's episodic learners). The weights are applied once, when the run
starts from step 0; a resumed run continues from its own checkpoint and never reads the file
again. `init_from.json` in the run folder records the file, its step and the weights' hash.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from episodes.util.atomic_files import write_text_atomically
from learners import LearnerConfigError
from learners.methods.learner import Learner
from learners.training.checkpoint_file import (
    read_checkpoint_payload,
    resolve_checkpoint,
    weights_hash,
)
from learners.training.training_loop import BEST, CHECKPOINTS, VALIDATION_LOG

__all__ = [
    "apply_backbone_init",
    "BACKBONE",
    "BackboneInit",
    "chosen_checkpoint",
    "OPTION",
    "read_backbone_init",
    "RECORD",
    "RECORD_KEY",
    "write_record",
]

OPTION = "--init-from"
BACKBONE = "backbone."  # the backbone's keys in a learner's state dict
RECORD = "init_from.json"  # in the run folder: what the backbone started from
RECORD_KEY = "init_from"  # config.json's record of the option (compared on resume)


@dataclass(frozen=True)
class BackboneInit:
    """The backbone weights a run starts from, read and checked once."""

    checkpoint: Path
    step: int
    method: str
    weights: dict[str, torch.Tensor]
    why: str = "as given"  # why this file of a run folder: its best or its last checkpoint

    def line(self, given: str | os.PathLike) -> str:
        """The one line a run starting from it prints: the file taken, its step and why."""
        return f"note: {OPTION} {given} takes {self.checkpoint} (step {self.step}, {self.why})"

    def record(self) -> dict[str, Any]:
        """What `init_from.json` says: the file, its step and method, the weights' hash."""
        return {
            "checkpoint": str(self.checkpoint),
            "step": self.step,
            "method": self.method,
            "backbone_weights": weights_hash(self.weights),
        }


def _describe(config: dict[str, Any]) -> str:
    return f"{config.get('backbone')} width {config.get('width', 1.0)}"


def read_backbone_init(path: str | os.PathLike, target: Learner) -> BackboneInit:
    """The backbone weights of checkpoint (or run folder) `path`, checked against `target`'s
    backbone; ValueError in one line naming the file and the first tensor that differs."""
    checkpoint, why = chosen_checkpoint(path)
    checkpoint = checkpoint.resolve()
    payload = read_checkpoint_payload(checkpoint, OPTION)
    weights = {
        key[len(BACKBONE) :]: tensor
        for key, tensor in payload["model"].items()
        if key.startswith(BACKBONE)
    }
    if not weights:
        raise LearnerConfigError(f"{OPTION} {checkpoint}: the checkpoint holds no backbone weights")
    ours = target.backbone.state_dict()
    theirs, here = _describe(payload["config"]), _describe(target.config.to_dict())
    parameters = dict(target.backbone.named_parameters())
    for name, tensor in parameters.items():
        if name not in weights:
            raise LearnerConfigError(
                f"{OPTION} {checkpoint}: its backbone ({theirs}) has no {name}, which this "
                f"run's ({here}) needs: start from a run with the same --backbone and --width"
            )
        if tuple(weights[name].shape) != tuple(tensor.shape):
            raise LearnerConfigError(
                f"{OPTION} {checkpoint}: {name} is {tuple(weights[name].shape)} in its "
                f"backbone ({theirs}) but {tuple(tensor.shape)} in this run's ({here}): start "
                "from a run with the same --backbone and --width"
            )
    # BatchNorm statistics this run does not keep (support or episode moments) are dropped
    unexpected = sorted(k for k in weights if k not in ours and not _is_running_statistic(k))
    if unexpected:
        raise LearnerConfigError(
            f"{OPTION} {checkpoint}: its backbone ({theirs}) has {unexpected[0]}, which this "
            f"run's ({here}) does not: start from a run with the same --backbone and --width"
        )
    kept = {k: v for k, v in weights.items() if k in ours}
    return BackboneInit(
        checkpoint, int(payload.get("step", 0)), str(payload["config"].get("method")), kept, why
    )


def chosen_checkpoint(path: str | os.PathLike) -> tuple[Path, str]:
    """The checkpoint `--init-from path` takes and why: a run folder's best.pt when the run
    validated (validation.csv has a row), else its last.pt; a file as given."""
    folder = Path(path)
    best = folder / CHECKPOINTS / BEST
    if folder.is_dir() and best.is_file() and _validated(folder):
        return best, "the run's best-validation checkpoint"
    checkpoint = resolve_checkpoint(path, OPTION)
    if folder.is_dir():
        return checkpoint, "the run's last checkpoint: it did not validate"
    return checkpoint, "as given"


def _validated(run: Path) -> bool:
    log = run / VALIDATION_LOG
    return log.is_file() and len(log.read_text().strip().splitlines()) > 1


def _is_running_statistic(name: str) -> bool:
    return name.rsplit(".", 1)[-1] in ("running_mean", "running_var", "num_batches_tracked")


def apply_backbone_init(learner: Learner, init: BackboneInit) -> None:
    """Copy `init`'s weights into `learner.backbone` (this run's own running statistics stay
    where the source kept none)."""
    with torch.no_grad():
        state = learner.backbone.state_dict()
        for name, tensor in init.weights.items():
            state[name].copy_(tensor.to(state[name].device, state[name].dtype))


def write_record(run_dir: str | os.PathLike, init: BackboneInit) -> Path:
    """Write `init_from.json` into the run folder (atomically)."""
    path = Path(run_dir) / RECORD
    write_text_atomically(path, json.dumps(init.record(), indent=2, sort_keys=True) + "\n")
    return path
