"""How weight decay enters a training step: the learners' optimisers and the parameters decayed.

`coupled` (torch's `weight_decay`): wd * theta is added to the gradient, so it also goes
through Nesterov momentum or Adam's moments. `decoupled` (SGDW/AdamW, Loshchilov & Hutter):
each decayed parameter is multiplied by (1 - lr * wd) apart from the gradient step, before it;
this is fastai v1's `true_wd=True` (`OptimWrapper.step`), with which Dhillon et al.'s
`pretrain.py` trains. Parameters with ndim <= 1 (BatchNorm scales and offsets, biases) are never
decayed: fastai >= 1.0.43 with `bn_wd=False` skips the same (BatchNorm and LayerNorm
parameters and the biases of its linear and convolution layers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from learners import LearnerConfigError

__all__ = ["build_optimizer", "decay_groups", "DecoupledSGD", "WEIGHT_DECAY_FORMS"]

WEIGHT_DECAY_FORMS = ("coupled", "decoupled")


def decay_groups(
    module: nn.Module, weight_decay: float, undecayed: Iterable[nn.Parameter] = ()
) -> list[dict[str, Any]]:
    """Two parameter groups of `module`'s trainable parameters: those with ndim > 1 with
    `weight_decay`, the rest (BatchNorm parameters, biases) with none, followed there by the
    `undecayed` ones of ndim > 1 (those a method's reference puts no L2 regulariser on)."""
    exempt = {id(p) for p in undecayed}
    decay, no_decay, exempted = [], [], []
    for parameter in module.parameters():
        if not parameter.requires_grad:
            continue
        if parameter.ndim <= 1:
            no_decay.append(parameter)
        else:
            (exempted if id(parameter) in exempt else decay).append(parameter)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay + exempted, "weight_decay": 0.0},
    ]


class DecoupledSGD(torch.optim.SGD):
    """torch SGD whose groups' `weight_decay` scales each parameter by (1 - lr * weight_decay)
    before the step instead of entering the gradient (SGDW; fastai v1 `true_wd=True`).
    Parameters without a gradient are left alone, as torch's AdamW does."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Each group's `weight_decay` becomes its decoupled decay; SGD's own stays 0."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        group["decoupled_weight_decay"] = group["weight_decay"]
        group["weight_decay"] = 0.0

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            factor = 1.0 - group["lr"] * group["decoupled_weight_decay"]
            if factor == 1.0:
                continue
            for parameter in group["params"]:
                if parameter.grad is not None:
                    parameter.mul_(factor)
        super().step()
        return loss


def build_optimizer(
    groups: list[dict[str, Any]], name: str, lr: float, form: str
) -> torch.optim.Optimizer:
    """Adam, or SGD with Nesterov momentum 0.9, over `groups` (each with its `weight_decay`),
    the decay `coupled` or `decoupled` (ValueError naming the flag otherwise)."""
    if form not in WEIGHT_DECAY_FORMS:
        raise LearnerConfigError(
            f"--weight-decay-form {form}: expected one of {', '.join(WEIGHT_DECAY_FORMS)}"
        )
    decoupled = form == "decoupled"
    if name == "adam":
        if decoupled:  # AdamW: theta * (1 - lr wd), then Adam's step
            return torch.optim.Adam(groups, lr=lr, decoupled_weight_decay=True)
        return torch.optim.Adam(groups, lr=lr)
    if name == "sgd":
        if decoupled:
            return DecoupledSGD(groups, lr=lr, momentum=0.9, nesterov=True)
        return torch.optim.SGD(groups, lr=lr, momentum=0.9, nesterov=True)
    raise LearnerConfigError(f"unknown optimizer {name!r}; expected 'adam' or 'sgd'")
