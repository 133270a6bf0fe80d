"""One optimiser step on a meta-batch: M items on this rank (M*W over all ranks), each its own
forward pass, the loss averaged over the M*W items.

Each item's loss is back-propagated at once (memory of one item at a time) and its gradients
added to float64 sums; the ranks' sums are then all-reduced (one flat buffer, which also
carries which parameters got a gradient, and the losses) and divided by M*W, so every rank
steps with the gradient of the mean loss over the global meta-batch: the same as one process
with `--meta-batch M*W` (float64 sums make the grouping of the additions irrelevant). Because
every item is its own forward pass, BatchNorm sees the same batches (one episode) however the
items are spread over ranks; the running statistics are then combined as if one process had
applied the M*W updates in item order (`combine_running_stats`). Item i's random draws (mixup,
augmentation, dropout) come from torch's generator seeded by (seed, i), so they do not depend
on which rank trains on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from learners.methods.learner import Learner
from learners.training.distributed import RankInfo, ShardPlan, all_reduce_sum

__all__ = [
    "combine_running_stats",
    "GradientSum",
    "item_seed",
    "meta_batch_step",
    "meta_batch_stepper",
    "running_stats",
]


def item_seed(seed: int, index: int) -> int:
    """The torch seed of global item `index` of a meta-batched run."""
    return int(np.random.SeedSequence([seed, 23, index]).generate_state(2, np.uint64)[0] >> 1)


def _tracked_norms(module: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    return [
        m
        for m in module.modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm)
        and m.track_running_stats
        and m.running_mean is not None
    ]


def running_stats(module: nn.Module) -> list[tuple[torch.Tensor, ...]]:
    """Copies of every tracking BatchNorm's (running_mean, running_var, num_batches_tracked)."""
    return [
        (m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone())
        for m in _tracked_norms(module)
    ]


def combine_running_stats(
    module: nn.Module, before: list[tuple[torch.Tensor, ...]], plan: ShardPlan, ranks: RankInfo
) -> None:
    """Set every rank's running statistics to those of one process applying the M*W updates.

    With momentum m and a = 1 - m, M updates from r0 give a^M r0 + d_r (d_r: rank r's part);
    one process applying rank 0's M updates, then rank 1's, ... ends at
    a^(M*W) r0 + sum_r a^(M*(W-1-r)) d_r, a sum the ranks all-reduce (every layer's in one
    buffer). BatchNorm without a momentum (a cumulative average) gets the ranks' mean."""
    if not ranks.sharded:
        return
    norms = _tracked_norms(module)
    M, W, r = plan.meta_batch, plan.world_size, plan.rank
    with torch.no_grad():
        parts = []
        for norm, (mean0, var0, count0) in zip(norms, before):
            for buffer, start in ((norm.running_mean, mean0), (norm.running_var, var0)):
                if norm.momentum is None:
                    parts.append(buffer.float() / W)
                else:
                    keep = 1.0 - norm.momentum
                    parts.append(((buffer - keep**M * start) * keep ** (M * (W - 1 - r))).float())
            parts.append((norm.num_batches_tracked - count0).float().reshape(1))
        if not parts:
            return
        total = all_reduce_sum(torch.cat(parts), ranks)
        offset = 0
        for norm, (mean0, var0, count0) in zip(norms, before):
            for buffer, start in ((norm.running_mean, mean0), (norm.running_var, var0)):
                part = total[offset : offset + buffer.numel()].view_as(buffer).to(buffer.dtype)
                offset += buffer.numel()
                if norm.momentum is None:
                    buffer.copy_(part)
                else:
                    buffer.copy_((1.0 - norm.momentum) ** (M * W) * start + part)
            norm.num_batches_tracked.copy_(count0 + int(round(float(total[offset]))))
            offset += 1


class GradientSum:
    """The float64 sum of the items' gradients of every parameter the optimiser steps.

    Summing in float64 and rounding once makes the result independent of how the items are
    grouped (one process adds them one by one, W ranks add their shares and then the shares):
    float32 sums in another order differ in the last bits, and Adam turns the pure-rounding
    gradients of a bias before BatchNorm into full-size steps, so such runs drift apart."""

    def __init__(self, params: Sequence[nn.Parameter]):
        self.params = list(params)
        self.sums = [torch.zeros_like(p, dtype=torch.float64) for p in self.params]
        self.reached = torch.zeros(len(self.params), dtype=torch.float64)

    def start(self) -> None:
        for total in self.sums:
            total.zero_()
        self.reached.zero_()

    def add_gradients(self) -> None:
        """Move the parameters' `.grad` (one item's backward pass) into the sums."""
        for index, param in enumerate(self.params):
            if param.grad is not None:
                self.sums[index].add_(param.grad)
                self.reached[index] = 1.0
                param.grad = None

    def set_mean_gradients(self, loss_sum: torch.Tensor, count: int, ranks: RankInfo) -> float:
        """Every parameter's `.grad` := the mean over the ranks' `count` items (None where no
        rank reached it); returns the summed loss of all ranks (`loss_sum`: this rank's, a
        float64 scalar on the device, read once here rather than once per item)."""
        if not ranks.sharded:  # nothing to exchange
            for param, total, reached in zip(self.params, self.sums, self.reached.tolist()):
                param.grad = (total / count).to(param.dtype) if reached > 0 else None
            return float(loss_sum)
        device = self.params[0].device
        extra = torch.cat([self.reached.to(device), loss_sum.to(device).reshape(1)])
        flat = torch.cat([*(t.reshape(-1) for t in self.sums), extra])
        all_reduce_sum(flat, ranks)
        offset = 0
        flags = flat[len(flat) - len(self.params) - 1 : -1].tolist()
        for param, total, flag in zip(self.params, self.sums, flags):
            chunk = flat[offset : offset + total.numel()]
            offset += total.numel()
            param.grad = (chunk / count).view_as(param).to(param.dtype) if flag > 0 else None
        return float(flat[-1])


def _parameters(learner: Learner) -> list[nn.Parameter]:
    assert learner.optimizer is not None
    return [p for group in learner.optimizer.param_groups for p in group["params"]]


def meta_batch_step(
    learner: Learner,
    items: Sequence[Any],
    step: int,
    plan: ShardPlan,
    ranks: RankInfo,
    seed: int,
    gradients: GradientSum | None = None,
) -> float:
    """One optimiser step on this rank's `items` of 1-based `step`; returns the mean loss of
    the global meta-batch (the same number on every rank)."""
    if len(items) != plan.meta_batch:
        raise ValueError(f"meta-batch of {len(items)} items; expected {plan.meta_batch}")
    optimizer = learner.optimizer
    assert optimizer is not None
    scaler = learner.precision.scaler
    gradients = gradients or GradientSum(_parameters(learner))
    before = running_stats(learner) if ranks.sharded else []
    optimizer.zero_grad(set_to_none=True)
    gradients.start()
    loss_sum: torch.Tensor | None = None  # on the device: no GPU sync per item
    for item, index in zip(items, plan.step_indices(step)):
        torch.manual_seed(item_seed(seed, index))
        loss = learner.item_loss(item)
        value = loss.detach().to(torch.float64)
        loss_sum = value if loss_sum is None else loss_sum + value
        (scaler.scale(loss) if scaler is not None else loss).backward()
        gradients.add_gradients()
    assert loss_sum is not None  # items is not empty (checked above: M >= 1)
    total = gradients.set_mean_gradients(loss_sum, plan.global_meta_batch, ranks)
    combine_running_stats(learner, before, plan, ranks)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return total / plan.global_meta_batch


def meta_batch_stepper(
    plan: ShardPlan, ranks: RankInfo, seed: int
) -> Callable[[Learner, Sequence[Any], int], float]:
    """The training loop's step function for `plan` (see `meta_batch_step`)."""

    sums: dict[int, GradientSum] = {}  # the float64 sums, allocated once per learner

    def step_fn(learner: Learner, items: Sequence[Any], step: int) -> float:
        if id(learner) not in sums:
            sums[id(learner)] = GradientSum(_parameters(learner))
        return meta_batch_step(learner, items, step, plan, ranks, seed, sums[id(learner)])

    return step_fn
