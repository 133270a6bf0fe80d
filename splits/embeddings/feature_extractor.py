"""The feature extractor of an embedding job: a learners checkpoint -> its backbone in eval mode.

The learner is rebuilt from the checkpoint alone (`learners.training.checkpoint_file`) and its `backbone`
(the network without its last linear layer, as ATG sec. 5 defines the feature extractor) is
what embeds images.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from torch import nn

from learners.feed.episode_batch import Normalization
from learners.training.checkpoint_file import (
    CheckpointError,
    load_checkpoint_learner,
    resolve_checkpoint,
    weights_hash,
)

# the checkpoint helpers live in learners.training.checkpoint_file; these names stay importable from here
__all__ = [
    "CheckpointError",
    "ModelInfo",
    "load_feature_extractor",
    "resolve_checkpoint",
    "weights_hash",
]


@dataclass(frozen=True)
class ModelInfo:
    """What the embeddings file records about the model (picklable, for Beam workers)."""

    checkpoint: str
    backbone: str
    method: str
    image_size: int
    width: float
    step: int
    feature_dim: int
    weights_hash: str

    @property
    def name(self) -> str:
        """Short description stored as the npz `model` (no path: the file stays relocatable)."""
        width = "" if self.width == 1.0 else f", width {self.width:g}"
        return (
            f"{self.backbone} ({self.method}{width}, {self.image_size}px, step {self.step}) "
            "without its last layer"
        )


def load_feature_extractor(
    path: str | os.PathLike, device: torch.device | str = "cpu"
) -> tuple[nn.Module, Normalization, ModelInfo]:
    """(backbone in eval mode on `device`, input normalisation, ModelInfo) of a checkpoint."""
    learner, checkpoint, step = load_checkpoint_learner(path)
    config = learner.config
    backbone = getattr(learner, "backbone", None)
    if not isinstance(backbone, nn.Module):
        raise CheckpointError(f"--model {checkpoint}: learner {config.method} has no backbone")
    backbone = backbone.to(device).eval()
    info = ModelInfo(
        checkpoint=str(checkpoint),
        backbone=config.backbone,
        method=config.method,
        image_size=int(config.image_size),
        width=float(config.width),
        step=step,
        feature_dim=int(backbone.out_dim),
        weights_hash=weights_hash(backbone.state_dict()),
    )
    return backbone, learner.normalization, info
