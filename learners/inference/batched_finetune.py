"""(Transductive) fine-tuning of B episodes at once (Dhillon et al. sec. 3, A.3, A.4; issue 22).

The same algorithm as `learners.inference.finetune.finetune_network`, episode by episode, but with one copy
of every parameter and BatchNorm buffer per episode stacked along a leading dimension and run by
`torch.func.functional_call` under `vmap`: every BatchNorm layer sees one episode's images only
(batch statistics and running averages never mix episodes), and padding is masked out of the
statistics (`learners.nn.batched_batch_norm`) and the losses. Each update augments all episodes'
images in one call with draws from each episode's own generator (so the batch size never changes
an episode's augmentation) and takes one Adam step over the stacked tensors: Adam is elementwise
with one step count, so that is B independent Adam optimisers. Loss = the sum of the episodes'
losses, whose gradient with respect to an episode's copy is that episode's gradient.

An episode whose support (or, transductive, query) set is larger than the BatchNorm micro-batch
(`FinetuneOptions.bn_micro_batch`, the authors' 75) is fine-tuned alone by
`finetune_query_logits`, with its per-chunk BatchNorm statistics and the same generator, so its
logits are those of the one-at-a-time loop; the others of the batch are stacked as above.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from learners.feed.batched_episodes import (
    EpisodeStack,
    mask_ways,
    masked_means,
    stack_episodes,
    unstack_logits,
)
from learners.feed.episode_batch import EpisodeTensors, Normalization
from learners.inference.finetune import FinetuneOptions, batch_norm_training, finetune_query_logits
from learners.inference.finetune_augment import AugmentDraws, apply_augmentation, draw_augmentation
from learners.nn.batched_batch_norm import with_masked_batch_norm
from learners.nn.prototypes import cosine_classifier_logits, support_based_init

__all__ = [
    "batched_augment",
    "batched_finetune_query_logits",
    "cosine_head_init",
    "resolved_stacking",
    "stacked_copies",
    "StackedNetwork",
    "STACKINGS",
    "Tensors",
]

Tensors = dict[str, torch.Tensor]


def stacked_copies(values: Sequence[tuple[str, torch.Tensor]], count: int) -> Tensors:
    """`count` independent copies of each tensor along a new leading dimension."""
    return {
        name: value.detach().unsqueeze(0).expand(count, *value.shape).clone()
        for name, value in values
    }


def batched_augment(
    images: torch.Tensor,
    mask: torch.Tensor,
    generators: Sequence[torch.Generator | None],
    normalization: Normalization,
) -> torch.Tensor:
    """(B, N, C, H, W) images -> augmented, one call for all; episode b's real images take
    draws from `generators[b]` (in the order one-at-a-time fine-tuning draws them), padding
    the identity."""
    batch, count = images.shape[:2]
    reals = [int(real) for real in mask.sum(dim=1).tolist()]
    # Generators draw on the CPU: gather all draws there and copy them to the device once.
    cpu = all(generator is not None for generator in generators)
    where = torch.device("cpu") if cpu else images.device
    parts = []
    for index in range(batch):
        parts.append(draw_augmentation(reals[index], where, generators[index]))
        if reals[index] < count:
            parts.append(AugmentDraws.identity(count - reals[index], device=where))
    draws = AugmentDraws.cat(parts).to(images.device)
    flat = apply_augmentation(images.flatten(0, 1), draws, normalization)
    return flat.view_as(images)


STACKINGS = ("auto", "vmap", "loop")


def resolved_stacking(stacking: str, device: torch.device) -> str:
    """'auto' is `vmap` on accelerators (where batching saves kernel launches) and `loop` on
    the CPU (where vmap's grouped convolutions and batched BatchNorm run slower than B plain
    calls; benchmarks/evaluate.py measures both)."""
    if stacking not in STACKINGS:
        raise ValueError(f"stacking {stacking!r}: expected one of {STACKINGS}")
    if stacking == "auto":
        return "loop" if device.type == "cpu" else "vmap"
    return stacking


class StackedNetwork:
    """B copies of a network: stacked parameters and buffers, run by one vmapped functional
    call (`vmap`) or one functional call per copy on its real images (`loop`); either way one
    set of stacked tensors for the optimiser."""

    def __init__(self, network: nn.Module, stack: EpisodeStack, stacking: str = "vmap"):
        self.stacking = stacking
        if stack.padded and stacking == "vmap":
            self.module, self.mask_names = with_masked_batch_norm(network)
        else:
            self.module, self.mask_names = copy.deepcopy(network), []
        count = stack.size
        self.params = stacked_copies(list(self.module.named_parameters()), count)
        for value in self.params.values():
            value.requires_grad_()
        self.buffers = stacked_copies(list(self.module.named_buffers()), count)

    def __call__(self, images: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, N, C, H, W) images -> (B, N, K) outputs, episode b through copy b (rows of
        padded images: zeros in `loop`, unused values in `vmap`)."""
        if self.stacking == "loop":
            return self._loop(images, mask)
        buffers = dict(self.buffers)
        for name in self.mask_names:
            buffers[name] = mask

        def one(params: Tensors, buffers: Tensors, x: torch.Tensor) -> torch.Tensor:
            return functional_call(self.module, (params, buffers), (x,))

        return vmap(one)(self.params, buffers, images)

    def _loop(self, images: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        outputs = []
        for index, real in enumerate(mask.sum(dim=1).tolist()):
            params = {name: value[index] for name, value in self.params.items()}
            buffers = {name: value[index] for name, value in self.buffers.items()}
            out = functional_call(self.module, (params, buffers), (images[index, : int(real)],))
            outputs.append(out)
        count = images.shape[1]
        return torch.stack([F.pad(out, (0, 0, 0, count - out.shape[0])) for out in outputs])


def cosine_head_init(
    logits: torch.Tensor, stack: EpisodeStack, relu: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each episode's eq. 6 initialisation from its (B, S, K) support logits, zero rows for
    padded ways: (B, W, K) weights and (B, W) biases."""
    ways = stack.way_mask.shape[1]
    weight = logits.new_zeros(stack.size, ways, logits.shape[-1], dtype=torch.float32)
    for index, ep in enumerate(stack.episodes):
        real = logits[index, : len(ep.support_labels)].float()
        w, _ = support_based_init(real, ep.support_labels, ep.ways, relu)
        weight[index, : ep.ways] = w
    bias = weight.new_zeros(stack.size, ways)
    return weight.requires_grad_(), bias.requires_grad_()


def batched_finetune_query_logits(
    network: nn.Module,
    episodes: Sequence[EpisodeTensors],
    options: FinetuneOptions,
    normalization: Normalization = Normalization(),
    generators: Sequence[torch.Generator | None] | None = None,
    autocast: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
    stacking: str = "auto",
) -> list[torch.Tensor]:
    """Each episode's (Q, ways) query logits after fine-tuning its own copy of `network`
    (images -> logits over training classes); `network` is left unchanged. `generators[b]`
    draws episode b's augmentation (None: the global stream); `stacking`: see
    `resolved_stacking`."""
    generators = list(generators) if generators is not None else [None] * len(episodes)
    if len(generators) != len(episodes):
        raise ValueError(f"{len(generators)} generators for {len(episodes)} episodes")
    alone = [index for index, ep in enumerate(episodes) if _micro_batched(ep, options)]
    if alone:
        results: list[torch.Tensor | None] = [None] * len(episodes)
        for index in alone:
            with autocast():
                results[index] = finetune_query_logits(
                    network, episodes[index], options, normalization, generators[index]
                ).float()
        rest = [index for index in range(len(episodes)) if index not in alone]
        if rest:
            stacked = batched_finetune_query_logits(
                network,
                [episodes[index] for index in rest],
                options,
                normalization,
                [generators[index] for index in rest],
                autocast,
                stacking,
            )
            for index, values in zip(rest, stacked):
                results[index] = values
        return [values for values in results if values is not None]
    stack = stack_episodes(episodes)
    net = StackedNetwork(network, stack, resolved_stacking(stacking, stack.support_images.device))
    head = torch.func.vmap(cosine_classifier_logits, in_dims=(0, 0, 0, None))

    def logits(images: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        with autocast():
            outputs = net(images, mask)
        return mask_ways(head(outputs.float(), weight, bias, options.relu), stack.way_mask)

    def batch(images: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if not options.augment:
            return images
        return batched_augment(images, mask, generators, normalization)

    entropy_weights = torch.ones(stack.size, device=stack.support_images.device)
    if options.entropy_log_ways:
        for index, ep in enumerate(stack.episodes):
            if ep.ways > 1:
                entropy_weights[index] = 1.0 / math.log(ep.ways)
    net.module.eval()
    with torch.enable_grad():
        with torch.no_grad(), autocast():
            outputs = net(stack.support_images, stack.support_mask)
        weight, bias = cosine_head_init(outputs, stack, options.relu)
        parameters = [*net.params.values(), weight, bias]
        fused = parameters[0].device.type == "cuda"
        optimizer = torch.optim.Adam(parameters, lr=options.lr, fused=fused or None)
        if not options.freeze_batch_norm:
            batch_norm_training(net.module)
        labels = stack.support_labels
        for _ in range(options.epochs):
            optimizer.zero_grad(set_to_none=True)
            support = logits(batch(stack.support_images, stack.support_mask), stack.support_mask)
            losses = F.cross_entropy(support.transpose(1, 2), labels, reduction="none")
            masked_means(losses, stack.support_mask).sum().backward()
            optimizer.step()
            if options.transductive:
                optimizer.zero_grad(set_to_none=True)
                query = logits(batch(stack.query_images, stack.query_mask), stack.query_mask)
                log_p = F.log_softmax(query, dim=2)
                entropy = -(log_p.exp() * log_p).sum(dim=2)
                (entropy_weights * masked_means(entropy, stack.query_mask)).sum().backward()
                optimizer.step()
    net.module.eval()
    with torch.no_grad():
        final = logits(stack.query_images, stack.query_mask)
    return [values.detach() for values in unstack_logits(final, stack)]


def _micro_batched(ep: EpisodeTensors, options: FinetuneOptions) -> bool:
    """Whether fine-tuning `ep` runs a set in BatchNorm micro-batches (then it goes alone)."""
    sizes = [len(ep.support_labels)] + ([len(ep.query_labels)] if options.transductive else [])
    return any(options.micro_batched(size) for size in sizes)
