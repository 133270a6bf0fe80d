"""The feature extractor of an embedding job: a learners checkpoint -> its backbone in eval mode.

A checkpoint written by `learners.training_loop.save_checkpoint` holds the learner's config
(method, backbone name, image size, width, ...) and its state dict, so the learner is rebuilt
with `learners.registry.build_learner` and its `backbone` (the network without its last linear
layer, as ATG sec. 5 defines the feature extractor) is what embeds images.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from learners.episode_batch import Normalization
from learners.learner import LearnerConfig
from learners.registry import build_learner
from learners.training_loop import CHECKPOINTS, LAST


class CheckpointError(ValueError):
    """A --model path that is not a usable learners checkpoint."""


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


def resolve_checkpoint(path: str | os.PathLike) -> Path:
    """A checkpoint file, or a learners run folder (-> its checkpoints/last.pt)."""
    path = Path(path)
    if path.is_file():
        return path
    if path.is_dir():
        for candidate in (path / CHECKPOINTS / LAST, path / LAST):
            if candidate.is_file():
                return candidate
        raise CheckpointError(
            f"--model {path}: folder has no {CHECKPOINTS}/{LAST} (expected a learners run folder "
            "or a .pt checkpoint)"
        )
    raise CheckpointError(f"--model {path}: no such checkpoint file or run folder")


def weights_hash(state_dict: Mapping[str, torch.Tensor]) -> str:
    """sha256 over every tensor of a state dict in key order (name, dtype, shape, raw bytes)."""
    digest = hashlib.sha256()
    for key, tensor in state_dict.items():
        data = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{key}\0{data.dtype}\0{tuple(tensor.shape)}\0".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes())
    return "sha256:" + digest.hexdigest()


def _read_payload(path: Path) -> dict:
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a file that is not a checkpoint
        raise CheckpointError(
            f"--model {path}: not a torch checkpoint ({type(exc).__name__}: {exc})"
        ) from None
    missing = [k for k in ("model", "config") if not isinstance(payload, dict) or k not in payload]
    if missing:
        raise CheckpointError(
            f"--model {path}: checkpoint lacks {missing}; expected one written by learners "
            "(learners.training_loop.save_checkpoint: keys model, config, step)"
        )
    if not payload["config"].get("backbone"):
        raise CheckpointError(f"--model {path}: checkpoint config names no backbone")
    return payload


def load_feature_extractor(
    path: str | os.PathLike, device: torch.device | str = "cpu"
) -> tuple[nn.Module, Normalization, ModelInfo]:
    """(backbone in eval mode on `device`, input normalisation, ModelInfo) of a checkpoint."""
    checkpoint = resolve_checkpoint(path)
    payload = _read_payload(checkpoint)
    config = LearnerConfig.from_dict(payload["config"])
    try:
        learner = build_learner(config)
        learner.load_state_dict(payload["model"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise CheckpointError(
            f"--model {checkpoint}: weights do not fit a {config.method} learner with backbone "
            f"{config.backbone} ({str(exc).splitlines()[0]})"
        ) from None
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
        step=int(payload.get("step", 0)),
        feature_dim=int(backbone.out_dim),
        weights_hash=weights_hash(backbone.state_dict()),
    )
    return backbone, learner.normalization, info
