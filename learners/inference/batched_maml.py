"""The MAML family's evaluation inner loop for B episodes at once (Meta-Dataset sec. 2; issue 22).

What `learners.methods.maml.MAML.query_logits` does at evaluation, episode by episode: a head
started at zero (MAML, ANIL) or at the prototype-equivalent layer (Proto-MAML), `steps` first-order
SGD steps on the support cross-entropy (the backbone adapted too unless ANIL), then the adapted
model's query logits, BatchNorm on batch statistics (--batch-norm episode; BatchNorm's scale and
offset adapted only with --adapt-batch-norm, as `MAML.adapted_backbone_names` says). Here each episode runs under `vmap` with
`torch.func.grad` for the steps, so every episode's BatchNorm statistics, head and adapted
weights are its own; padded images (mixed shots) are masked out of BatchNorm and losses, padded
ways get logits that softmax to exactly 0 (their head rows never move).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from learners.feed.batched_episodes import (
    MASKED_LOGIT,
    masked_means,
    stack_episodes,
    unstack_logits,
)
from learners.feed.episode_batch import EpisodeTensors
from learners.nn.batched_batch_norm import with_masked_batch_norm
from learners.nn.prototypes import prototype_linear_layer

__all__ = ["batched_maml_query_logits", "HEAD", "masked_prototypes", "Tensors"]

Tensors = dict[str, torch.Tensor]
HEAD = ("head.weight", "head.bias")


def masked_prototypes(
    features: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, ways: int
) -> torch.Tensor:
    """(S, D) features -> (ways, D) means over the masked-in support images of each way (zero
    for a way without any: a padded way)."""
    one_hot = F.one_hot(labels, ways).to(features.dtype) * mask.to(features.dtype).unsqueeze(1)
    return one_hot.t() @ features / one_hot.sum(dim=0).clamp(min=1).unsqueeze(1)


def batched_maml_query_logits(
    learner: Any,
    episodes: Sequence[EpisodeTensors],
    autocast: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
) -> list[torch.Tensor]:
    """Each episode's (Q, ways) query logits after the evaluation inner loop of `learner` (a
    `MAML` learner: its variant, inner step size and evaluation steps)."""
    stack = stack_episodes(episodes)
    steps = learner.evaluation_steps()
    lr, variant = learner.inner_lr, learner.variant
    if stack.padded:
        module, mask_names = with_masked_batch_norm(learner.backbone)
    else:
        module, mask_names = learner.backbone, []
    backbone = {name: p.detach() for name, p in module.named_parameters()}
    adapted_names = sorted(learner.adapted_backbone_names())
    ways = stack.way_mask.shape[1]

    def features(params: Tensors, images: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        masks = {name: mask for name in mask_names}
        with autocast():
            return functional_call(module, {**params, **masks}, (images,)).float()

    def episode(support, labels, s_mask, query, q_mask, way_mask):  # noqa: ANN001, ANN202
        def logits(head: Tensors, feats: torch.Tensor) -> torch.Tensor:
            values = F.linear(feats, head[HEAD[0]], head[HEAD[1]])
            return values.masked_fill(~way_mask.unsqueeze(0), MASKED_LOGIT)

        support_features = features(backbone, support, s_mask)
        if variant.head_init == "prototypes":
            weight, bias = prototype_linear_layer(
                masked_prototypes(support_features, labels, s_mask, ways)
            )
        else:
            weight = support_features.new_zeros(ways, support_features.shape[1])
            bias = support_features.new_zeros(ways)
        fast: Tensors = {HEAD[0]: weight, HEAD[1]: bias}
        fast.update({name: backbone[name] for name in adapted_names})

        def with_fast(fast: Tensors) -> Tensors:
            return {**backbone, **{name: fast[name] for name in adapted_names}}

        def loss(fast: Tensors) -> torch.Tensor:
            feats = support_features
            if adapted_names:
                feats = features(with_fast(fast), support, s_mask)
            ce = F.cross_entropy(logits(fast, feats), labels, reduction="none")
            return masked_means(ce.unsqueeze(0), s_mask.unsqueeze(0))[0]

        for _ in range(steps):
            grads = grad(loss)(fast)
            fast = {name: fast[name] - lr * grads[name] for name in fast}
        return logits(fast, features(with_fast(fast), query, q_mask))

    with torch.no_grad():
        final = vmap(episode, randomness="error")(
            stack.support_images,
            stack.support_labels,
            stack.support_mask,
            stack.query_images,
            stack.query_mask,
            stack.way_mask,
        )
    return [values.detach() for values in unstack_logits(final, stack)]
