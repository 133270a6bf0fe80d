"""Where BatchNorm's moments come from in an episode: the three conventions of the papers.

- `running`: training normalises each forward batch with its own moments and keeps running
  averages; evaluation uses the running averages (torch's default, Dhillon et al.'s code).
- `support`: Meta-Dataset's convention (`transductive_batch_norm = False`, gin
  setups/trainer_config.gin; `bn()` in meta_dataset/models/functional_backbones.py): no running
  averages; the support set is normalised with its own moments and the query set with the
  *support set's* moments, at training and at test time, gradients flowing through the moments
  (`backprop_through_moments = True`).
- `episode`: no running averages; the support set and the query set are each normalised with
  their own moments (Meta-Dataset's `transductive_batch_norm = True`; MAML's usual convention).

Moments are per channel over (batch, height, width) with the biased variance and eps 1e-5, as
`tf.nn.moments(x, axes=[0, 1, 2])` and `tf.nn.batch_normalization(..., 0.00001)` compute them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from learners import LearnerConfigError

__all__ = [
    "BATCH_NORM_MODES",
    "channel_moments",
    "embed_support_query",
    "EpisodeBatchNorm2d",
    "moments_phase",
    "normalize_with",
    "recording",
    "replaying",
]

BATCH_NORM_MODES = ("running", "support", "episode")
_OFF, _RECORD, _REPLAY = "off", "record", "replay"


def channel_moments(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and biased variance of an NCHW batch over (N, H, W)."""
    mean = x.mean(dim=(0, 2, 3))
    var = (x - mean.view(1, -1, 1, 1)).pow(2).mean(dim=(0, 2, 3))
    return mean, var


def normalize_with(
    x: torch.Tensor,
    mean: torch.Tensor,
    var: torch.Tensor,
    scale: torch.Tensor | None,
    offset: torch.Tensor | None,
    eps: float,
) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) * scale + offset, per channel of an NCHW batch."""
    shape = (1, -1, 1, 1)
    out = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + eps)
    if scale is not None:
        out = out * scale.view(shape)
    if offset is not None:
        out = out + offset.view(shape)
    return out


class EpisodeBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm2d that can record the moments of one batch (the support set) and normalise
    later batches (the query set) with them; otherwise exactly `nn.BatchNorm2d` (same
    parameters and buffers, so checkpoints are unchanged)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.moments_phase = _OFF
        self.recorded: tuple[torch.Tensor, torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.moments_phase == _OFF:
            return super().forward(x)
        if self.moments_phase == _RECORD:
            self.recorded = channel_moments(x)
        elif self.recorded is None:
            raise RuntimeError("support-set moments were not recorded before the query pass")
        mean, var = self.recorded
        return normalize_with(x, mean, var, self.weight, self.bias, self.eps)


def _episode_norms(module: nn.Module) -> list[EpisodeBatchNorm2d]:
    return [m for m in module.modules() if isinstance(m, EpisodeBatchNorm2d)]


@contextmanager
def moments_phase(module: nn.Module, phase: str) -> Iterator[None]:
    """Within the block every EpisodeBatchNorm2d of `module` records (`record`) or reuses
    (`replay`) moments; afterwards they behave as plain BatchNorm again (recorded moments are
    kept until the next record, and dropped after a replay)."""
    norms = _episode_norms(module)
    for norm in norms:
        norm.moments_phase = phase
    try:
        yield
    finally:
        for norm in norms:
            norm.moments_phase = _OFF
            if phase == _REPLAY:
                norm.recorded = None


def embed_support_query(
    embed: Callable[[torch.Tensor], torch.Tensor],
    module: nn.Module,
    support: torch.Tensor,
    query: torch.Tensor,
    mode: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Embed support and query images under the BatchNorm convention `mode` (`module` holds
    the BatchNorm layers `embed` runs through). `running` embeds both as one batch (one set of
    moments while training, the running averages at evaluation)."""
    if mode == "running":
        features = embed(torch.cat([support, query]))
        return features[: len(support)], features[len(support) :]
    if mode == "support":
        with moments_phase(module, _RECORD):
            support_features = embed(support)
        with moments_phase(module, _REPLAY):
            return support_features, embed(query)
    if mode == "episode":
        return embed(support), embed(query)
    raise LearnerConfigError(f"--batch-norm {mode}: expected one of {', '.join(BATCH_NORM_MODES)}")


@contextmanager
def recording(module: nn.Module) -> Iterator[None]:
    """Record the moments of the batches embedded in the block (the support set)."""
    with moments_phase(module, _RECORD):
        yield


@contextmanager
def replaying(module: nn.Module) -> Iterator[None]:
    """Normalise the batches embedded in the block with the recorded (support) moments."""
    with moments_phase(module, _REPLAY):
        yield
