"""Within-episode gradient descent on a dict of tensors (MAML inner loop, Finn et al.).

Second order keeps the graph of each step so the meta-gradient flows through the updates;
first order treats the inner gradients as constants (fo-MAML, Meta-Dataset sec. 2), but the
adapted tensors still depend on their initial values (so gradients reach e.g. a Proto-MAML
initialisation).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from learners import LearnerConfigError

__all__ = ["Params", "sgd_adapt"]

Params = dict[str, torch.Tensor]


def sgd_adapt(
    loss_fn: Callable[[Params], torch.Tensor],
    params: Params,
    steps: int,
    lr: float,
    first_order: bool,
) -> Params:
    """Take `steps` SGD steps of size `lr` on `loss_fn`; returns the adapted tensors."""
    if steps < 0 or lr < 0:
        raise LearnerConfigError(f"inner steps and learning rate must be >= 0, got {steps}, {lr}")
    names = list(params)
    for _ in range(steps):
        if first_order:
            # Gradients at detached copies: constants for the outer loop, and the graph that
            # produced the current tensors (e.g. a prototype initialisation) stays intact.
            probe = {name: params[name].detach().requires_grad_() for name in names}
        else:
            probe = params
        loss = loss_fn(probe)
        grads = torch.autograd.grad(
            loss, [probe[n] for n in names], create_graph=not first_order, allow_unused=True
        )
        params = {
            name: params[name] if grad is None else params[name] - lr * grad
            for name, grad in zip(names, grads)
        }
    return params
