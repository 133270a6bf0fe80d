"""Which network measures the hardness Omega of an episode (Dhillon et al., sec. 4.4, eq. 9).

The paper computes Omega with one fixed, generic extractor (an ImageNet-trained ResNet-152: phi
is its L2-normalised logits, no ReLU), never with the model being evaluated, so that every
method is scored on the same hardness axis. `fixed_hardness_measure` loads any checkpoint of
this toolkit for that role: the logits of a multiclass network (the paper's phi), else the
backbone's features. `run_hardness_measure` falls back to the evaluated run itself, and says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from learners.evaluation.episode_eval import HardnessMeasure
from learners.feed.episode_batch import Normalization
from learners.methods.learner import Learner
from learners.methods.multiclass import MulticlassLearner
from learners.training.checkpoint_file import load_checkpoint_learner, weights_hash

__all__ = ["fixed_hardness_measure", "renormalized", "run_hardness_measure"]


@dataclass(frozen=True)
class _Extractor:
    """Images (normalised NCHW, any size) -> outputs of `module` at its own input size."""

    module: nn.Module
    image_size: int
    # (inputs', extractor's) normalisation when they differ (--input-scaling of the two runs)
    renormalize: tuple[Normalization, Normalization] | None = None

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        self.module.eval()
        if self.renormalize is not None:
            images = renormalized(images, *self.renormalize)
        if tuple(images.shape[-2:]) != (self.image_size, self.image_size):
            # bilinear resizing commutes with the per-channel normalisation (both are affine)
            images = F.interpolate(
                images,
                size=(self.image_size, self.image_size),
                mode="bilinear",
                align_corners=False,
            )
        with torch.no_grad():
            return self.module(images)


def _outputs(learner: Learner) -> tuple[nn.Module, str]:
    """The network whose outputs are phi: logits of a multiclass network, else features."""
    if isinstance(learner, MulticlassLearner):
        return learner.network(), "logits"
    return learner.backbone, "backbone features"


def renormalized(
    images: torch.Tensor, source: Normalization, target: Normalization
) -> torch.Tensor:
    """NCHW images normalised with `source` re-expressed with `target`'s mean and std."""

    def column(values: tuple[float, float, float]) -> torch.Tensor:
        return torch.tensor(values, device=images.device, dtype=images.dtype).view(1, 3, 1, 1)

    pixels = images * column(source.std) + column(source.mean)
    return (pixels - column(target.mean)) / column(target.std)


def fixed_hardness_measure(
    path: str | os.PathLike,
    device: torch.device,
    relu: bool = False,
    input_normalization: Normalization = Normalization(),
) -> HardnessMeasure:
    """Omega measured by the checkpoint (or run folder: its last.pt) at `path`, on images
    normalised with `input_normalization` (the evaluated run's; converted to the extractor's
    own when its --input-scaling differs)."""
    learner, checkpoint, step = load_checkpoint_learner(path, "--hardness-model")
    learner = learner.to(device).eval()
    module, kind = _outputs(learner)
    config = learner.config
    description = (
        f"{kind} of {config.backbone} ({config.method}, step {step}, "
        f"{weights_hash(module.state_dict())[:19]}) from {checkpoint}"
    )
    own = learner.normalization
    renormalize = None if own == input_normalization else (input_normalization, own)
    return HardnessMeasure(_Extractor(module, config.image_size, renormalize), description, relu)


def run_hardness_measure(learner: Learner, relu: bool = False) -> HardnessMeasure:
    """Omega measured by the evaluated learner itself (not the paper's fixed extractor)."""
    module, kind = _outputs(learner)
    description = f"{kind} of the evaluated run (not a fixed extractor; see --hardness-model)"
    return HardnessMeasure(_Extractor(module, learner.config.image_size), description, relu)
