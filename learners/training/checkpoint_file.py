"""A learners checkpoint file as a model: resolve a .pt or run folder, check it, rebuild its learner.

A checkpoint written by `learners.training.training_loop.save_checkpoint` holds the learner's config
(method, backbone name, image size, width, ...) and its state dict, so any checkpoint of this
toolkit can be rebuilt without its run folder: the embedding job (`splits.embeddings.feature_extractor`)
and the fixed hardness extractor (`learners.evaluation.hardness_model`) both load models this way.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from episodes.util.cli_errors import UserError
from learners.methods.learner import Learner
from learners.methods.registry import build_learner, learner_config_from_dict
from learners.training.training_loop import CHECKPOINTS, LAST

__all__ = [
    "CheckpointError",
    "load_checkpoint_learner",
    "read_checkpoint_payload",
    "resolve_checkpoint",
    "weights_hash",
]


class CheckpointError(UserError, ValueError):
    """A checkpoint path that is not a usable learners checkpoint."""


def resolve_checkpoint(path: str | os.PathLike, option: str = "--model") -> Path:
    """A checkpoint file, or a learners run folder (-> its checkpoints/last.pt)."""
    path = Path(path)
    if path.is_file():
        return path
    if path.is_dir():
        for candidate in (path / CHECKPOINTS / LAST, path / LAST):
            if candidate.is_file():
                return candidate
        raise CheckpointError(
            f"{option} {path}: folder has no {CHECKPOINTS}/{LAST} (expected a learners run folder "
            "or a .pt checkpoint)"
        )
    raise CheckpointError(f"{option} {path}: no such checkpoint file or run folder")


def weights_hash(state_dict: Mapping[str, torch.Tensor]) -> str:
    """sha256 over every tensor of a state dict in key order (name, dtype, shape, raw bytes)."""
    digest = hashlib.sha256()
    for key, tensor in state_dict.items():
        data = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{key}\0{data.dtype}\0{tuple(tensor.shape)}\0".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes())
    return "sha256:" + digest.hexdigest()


def read_checkpoint_payload(path: Path, option: str = "--model") -> dict[str, Any]:
    """The checked payload of a checkpoint file: it has `model` weights and a `config`."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a file that is not a checkpoint
        # torch's message may advise weights_only=False: unsafe, so never repeated
        raise CheckpointError(
            f"{option} {path}: not a torch checkpoint, or a damaged one ({type(exc).__name__})"
        ) from None
    missing = [k for k in ("model", "config") if not isinstance(payload, dict) or k not in payload]
    if missing:
        raise CheckpointError(
            f"{option} {path}: checkpoint lacks {missing}; expected one written by learners "
            "(learners.training.training_loop.save_checkpoint: keys model, config, step)"
        )
    if not payload["config"].get("backbone"):
        raise CheckpointError(f"{option} {path}: checkpoint config names no backbone")
    return payload


def load_checkpoint_learner(
    path: str | os.PathLike, option: str = "--model"
) -> tuple[Learner, Path, int]:
    """(learner with the checkpoint's weights on the CPU, checkpoint file, its step)."""
    checkpoint = resolve_checkpoint(path, option)
    payload = read_checkpoint_payload(checkpoint, option)
    config = learner_config_from_dict(payload["config"])
    try:
        learner = build_learner(config)
        learner.load_state_dict(payload["model"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise CheckpointError(
            f"{option} {checkpoint}: weights do not fit a {config.method} learner with backbone "
            f"{config.backbone} ({str(exc).splitlines()[0]})"
        ) from None
    return learner, checkpoint, int(payload.get("step", 0))
