"""BatchNorm over the real images of a padded episode batch (batched evaluation).

When episodes of different sizes are stacked, each is padded to the largest; the padding must not
enter an episode's batch statistics. `MaskedBatchNorm2d` replaces a BatchNorm2d (same parameter
and buffer names, so `functional_call` dicts fit either) and, given a per-image 0/1 mask in its
`sample_mask` buffer, normalises by the mean and biased variance of the masked-in images and
updates the running statistics with the unbiased variance, the rule of `nn.BatchNorm2d`. With an
empty mask it is `nn.BatchNorm2d`.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MASK", "MaskedBatchNorm2d", "with_masked_batch_norm"]

MASK = "sample_mask"


class MaskedBatchNorm2d(nn.Module):
    """BatchNorm2d whose batch statistics count only the images with mask 1."""

    def __init__(self, norm: nn.BatchNorm2d):
        super().__init__()
        if norm.momentum is None:
            raise ValueError("masked BatchNorm needs a momentum (cumulative averages unsupported)")
        self.eps, self.momentum = norm.eps, norm.momentum
        self.track_running_stats = norm.track_running_stats
        self.weight, self.bias = norm.weight, norm.bias
        self.register_buffer("running_mean", norm.running_mean)
        self.register_buffer("running_var", norm.running_var)
        self.register_buffer("num_batches_tracked", norm.num_batches_tracked)
        self.register_buffer(MASK, torch.ones(0), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch_stats = self.training or self.running_mean is None
        mask = getattr(self, MASK)
        if not batch_stats or mask.numel() == 0:
            return self._plain(x, batch_stats)
        weights = mask.to(torch.float32).view(-1, 1, 1, 1)
        values = x.to(torch.float32)
        count = weights.sum() * x.shape[2] * x.shape[3]
        mean = (values * weights).sum(dim=(0, 2, 3)) / count
        centred = values - mean.view(1, -1, 1, 1)
        var = (centred.square() * weights).sum(dim=(0, 2, 3)) / count
        if self.training and self.running_mean is not None:
            with torch.no_grad():
                unbiased = var.detach() * count / (count - 1).clamp(min=1)
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean.detach())
                self.running_var.mul_(1 - self.momentum).add_(self.momentum * unbiased)
                self.num_batches_tracked.add_(1)
        out = centred * torch.rsqrt(var + self.eps).view(1, -1, 1, 1)
        if self.weight is not None:
            out = out * self.weight.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)
        return out.to(x.dtype)

    def _plain(self, x: torch.Tensor, batch_stats: bool) -> torch.Tensor:
        if self.training and self.running_mean is not None:
            self.num_batches_tracked.add_(1)
        return F.batch_norm(
            x,
            self.running_mean if not self.training or self.track_running_stats else None,
            self.running_var if not self.training or self.track_running_stats else None,
            self.weight,
            self.bias,
            batch_stats,
            self.momentum,
            self.eps,
        )


def with_masked_batch_norm(module: nn.Module) -> tuple[nn.Module, list[str]]:
    """A deep copy of `module` with every BatchNorm2d masked; returns it and the names of the
    mask buffers (one per layer, for `functional_call`)."""
    copied = copy.deepcopy(module)
    names = []
    for name, child in list(copied.named_modules()):
        for attr, sub in list(child.named_children()):
            if isinstance(sub, nn.BatchNorm2d):
                setattr(child, attr, MaskedBatchNorm2d(sub))
                prefix = f"{name}.{attr}" if name else attr
                names.append(f"{prefix}.{MASK}")
    return copied, names
