"""The classifier over the training classes in multiclass pre-training: a plain linear layer, or
Meta-Dataset's `linear_classifier` (meta_dataset/models/functional_classifiers.py), which its
k-NN and Finetune baselines pre-train with (`BaselineLearner.forward_pass_fc`).

Meta-Dataset's classifier, W (dim, classes) with columns w_c:
- cosine: logits = scale * <x / |x|, w_c>, no bias; x / sqrt(max(|x|^2, 1e-3)) as TensorFlow's
  l2_normalize with the reference's epsilon; w_c normalised the same way, unless weight norm is
  on: then w_c = g_c v_c / |v_c| is used as it is (logits = scale * g_c * cos(x, v_c));
- not cosine: logits = x W + b;
- weight norm (Salimans & Kingma): w_c = g_c v_c / |v_c|, v ~ N(0, 0.05), and on the first
  training batch g_c = 1 / sqrt(var(x v_c / |v_c|) + 1e-10) and b_c = -mean(x v_c / |v_c|) g_c
  (raw embeddings x), once (a saved flag, so a resumed run does not redo it); v carries no L2
  regulariser in the reference (`tf.get_variable` without one), so no weight decay here;
- no weight norm: W truncated normal with std 0.1 (weight decay applies), b = 0.1
  (`functional_backbones.weight_variable` / `bias_variable`).
The formula is `learners.nn.linear_classifier.MDHead`'s, the same layer the Finetune baseline
fits per episode; this module adds the one-time initialisation on a training batch (rank 0's under
torchrun, so that the ranks stay identical and match one process).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from learners import LearnerConfigError
from learners.nn.linear_classifier import LinearClassifierForm, MDHead

__all__ = ["HeadOptions", "HEADS", "MetaDatasetClassifier", "pretrain_classifier"]

HEADS = ("linear", "cosine")


@dataclass(frozen=True)
class HeadOptions:
    """`head` linear or cosine, the cosine logits' multiplier, weight norm on or off."""

    head: str = "linear"
    cosine_scale: float = 10.0
    weight_norm: bool = False

    @property
    def plain(self) -> bool:
        """The plain `nn.Linear` layer every run used before these options existed."""
        return self.head == "linear" and not self.weight_norm


class MetaDatasetClassifier(nn.Module):
    """Meta-Dataset's pre-training classifier (module docstring); `layer` holds v, g and b."""

    def __init__(self, dim: int, classes: int, options: HeadOptions):
        super().__init__()
        if options.head not in HEADS:
            raise LearnerConfigError(
                f"--pretrain-head {options.head}: expected one of {', '.join(HEADS)}"
            )
        self.options = options
        self.layer = MDHead(
            dim,
            classes,
            LinearClassifierForm(
                cosine=options.head == "cosine",
                weight_norm=options.weight_norm,
                cosine_multiplier=options.cosine_scale,
            ),
        )
        if not options.weight_norm:
            with torch.no_grad():
                nn.init.trunc_normal_(self.layer.v, std=0.1, a=-0.2, b=0.2)
        # 1 once g and b are set from data (saved, so that a resumed run keeps them)
        self.register_buffer(
            "initialised", torch.tensor(int(not options.weight_norm), dtype=torch.uint8)
        )
        self.needs_init = options.weight_norm  # a Python mirror: no tensor branch under vmap
        self.register_load_state_dict_post_hook(_read_initialised)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if self.training and self.needs_init:
            self.data_dependent_init(features)
        return self.layer(features)

    @torch.no_grad()
    def data_dependent_init(self, features: torch.Tensor) -> None:
        """g (and b) from this batch (`MDHead.data_dependent_init`, outside autocast); under
        several processes rank 0's values on every rank: rank 0's first batch is the first
        batch one process with the whole meta-batch initialises from (`ShardPlan`)."""
        layer = self.layer
        with torch.autocast(device_type=features.device.type, enabled=False):
            layer.data_dependent_init(features.detach().to(layer.v.dtype))
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            for tensor in (layer.g, layer.b):
                if tensor is not None:
                    dist.broadcast(tensor.data, src=0)
        self.initialised.fill_(1)
        self.needs_init = False

    def undecayed_parameters(self) -> list[nn.Parameter]:
        """The parameters the reference puts no L2 regulariser on beyond biases and gains:
        the direction v of a weight-normalised layer (`Learner.undecayed_parameters`)."""
        return [self.layer.v] if self.options.weight_norm else []


def _read_initialised(module: nn.Module, incompatible_keys: object) -> None:
    module.needs_init = not bool(module.initialised)


def pretrain_classifier(dim: int, classes: int, options: HeadOptions) -> nn.Module:
    """`nn.Linear` for the plain linear head (the state dict keys runs saved before have), else
    Meta-Dataset's classifier."""
    if options.plain:
        return nn.Linear(dim, classes)
    return MetaDatasetClassifier(dim, classes, options)
