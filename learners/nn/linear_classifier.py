"""Meta-Dataset's linear classifier as a layer (`linear_classifier`,
meta_dataset/models/functional_classifiers.py): W (dim, ways) stored as direction v and gain g
with weight norm (Salimans & Kingma), cosine logits (scale * <x / |x|, w_c>, no bias) or plain
ones (x W + b).

One layer, two users: the head the Finetune baseline fits per episode
(`learners.inference.md_finetune`) and the pre-training classifier of multiclass runs
(`learners.nn.pretrain_head`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from learners.nn.prototypes import tf_l2_normalize

__all__ = ["ClassifierForm", "LinearClassifierForm", "MDHead"]


class ClassifierForm(Protocol):
    """Which form of the layer: cosine or not, weight norm or not, the cosine logits' scale
    (`learners.inference.md_finetune.MDFinetuneOptions` is one)."""

    cosine: bool
    weight_norm: bool
    cosine_multiplier: float


@dataclass(frozen=True)
class LinearClassifierForm:
    """A ClassifierForm on its own (the defaults of `MDFinetuneOptions`)."""

    cosine: bool = True
    weight_norm: bool = True
    cosine_multiplier: float = 10.0


class MDHead(nn.Module):
    """The episode's output layer: W (dim, ways) stored as direction v and gain g with weight
    norm, a bias unless cosine."""

    def __init__(self, dim: int, ways: int, options: ClassifierForm):
        super().__init__()
        self.options = options
        if options.weight_norm:
            self.v = nn.Parameter(torch.randn(dim, ways) * 0.05)
            self.g = nn.Parameter(torch.ones(ways))
            self.b = nn.Parameter(torch.zeros(ways)) if not options.cosine else None
        else:
            self.v = nn.Parameter(torch.fmod(torch.randn(dim, ways), 2) * 0.1)  # truncated normal
            self.g = None
            self.b = nn.Parameter(torch.full((ways,), 0.1)) if not options.cosine else None

    @torch.no_grad()
    def data_dependent_init(self, features: torch.Tensor) -> None:
        """Weight norm's initialisation on the first batch: g = 1 / sqrt(var(x v/||v||) + 1e-10)
        and b = -mean * g per output (the outputs start normalised)."""
        if self.g is None:
            return
        outputs = features @ F.normalize(self.v, dim=0)
        mean, var = outputs.mean(dim=0), outputs.var(dim=0, unbiased=False)
        self.g.copy_(torch.rsqrt(var + 1e-10))
        if self.b is not None:
            self.b.copy_(-mean * self.g)

    def weight(self) -> torch.Tensor:
        if self.g is not None:
            return self.v * self.g / self.v.pow(2).sum(dim=0).sqrt()
        return tf_l2_normalize(self.v, dim=0) if self.options.cosine else self.v

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if self.options.cosine:
            return self.options.cosine_multiplier * (
                tf_l2_normalize(features, dim=1) @ self.weight()
            )
        return features @ self.weight() + self.b
