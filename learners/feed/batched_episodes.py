"""Several episodes stacked along a leading dimension, padded to the largest, with masks.

Batched evaluation (`learners.inference.batched_finetune`, `learners.inference.batched_maml`) runs B episodes in one
pass; episodes of different ways and shots are padded with zero images (mask 0) and extra ways
(way mask 0) so that no padding enters a loss, a prediction or a BatchNorm statistic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from learners.feed.episode_batch import EpisodeTensors

__all__ = [
    "EpisodeStack",
    "mask_ways",
    "MASKED_LOGIT",
    "masked_means",
    "size_buckets",
    "stack_episodes",
    "unstack_logits",
]

# Logit given to padded ways: exp() of it underflows to exactly 0 against any real logit, yet
# it stays finite so entropy terms (p log p) and their gradients stay 0, never NaN.
MASKED_LOGIT = -1e9


@dataclass
class EpisodeStack:
    """B episodes padded to S support, Q query images and W ways."""

    support_images: torch.Tensor  # (B, S, C, H, W)
    support_labels: torch.Tensor  # (B, S) int64, 0 where padded
    support_mask: torch.Tensor  # (B, S) bool
    query_images: torch.Tensor  # (B, Q, C, H, W)
    query_mask: torch.Tensor  # (B, Q) bool
    way_mask: torch.Tensor  # (B, W) bool
    episodes: Sequence[EpisodeTensors]

    @property
    def padded(self) -> bool:
        """Whether any image or way is padding (then BatchNorm needs the masks)."""
        return not bool(self.support_mask.all() and self.query_mask.all() and self.way_mask.all())

    @property
    def size(self) -> int:
        return len(self.episodes)


def _pad_images(images: torch.Tensor, length: int) -> torch.Tensor:
    extra = length - images.shape[0]
    if extra == 0:
        return images
    return torch.cat([images, images.new_zeros(extra, *images.shape[1:])])


def _mask(lengths: Sequence[int], length: int, device: torch.device) -> torch.Tensor:
    counts = torch.tensor(list(lengths), device=device).view(-1, 1)
    return torch.arange(length, device=device).view(1, -1) < counts


def stack_episodes(episodes: Sequence[EpisodeTensors]) -> EpisodeStack:
    """Pad and stack episodes (all with images of one size on one device)."""
    if not episodes:
        raise ValueError("stack_episodes needs at least one episode")
    shapes = {tuple(ep.support_images.shape[1:]) for ep in episodes}
    shapes |= {tuple(ep.query_images.shape[1:]) for ep in episodes}
    if len(shapes) != 1:
        raise ValueError(f"episodes to batch need one image shape, got {sorted(shapes)}")
    device = episodes[0].support_images.device
    supports = [len(ep.support_labels) for ep in episodes]
    queries = [len(ep.query_labels) for ep in episodes]
    ways = [ep.ways for ep in episodes]
    s, q, w = max(supports), max(queries), max(ways)
    labels = torch.zeros(len(episodes), s, dtype=torch.long, device=device)
    for index, ep in enumerate(episodes):
        labels[index, : supports[index]] = ep.support_labels
    return EpisodeStack(
        support_images=torch.stack([_pad_images(ep.support_images, s) for ep in episodes]),
        support_labels=labels,
        support_mask=_mask(supports, s, device),
        query_images=torch.stack([_pad_images(ep.query_images, q) for ep in episodes]),
        query_mask=_mask(queries, q, device),
        way_mask=_mask(ways, w, device),
        episodes=list(episodes),
    )


def mask_ways(logits: torch.Tensor, way_mask: torch.Tensor) -> torch.Tensor:
    """(B, N, W) logits in float32 with padded ways set to MASKED_LOGIT."""
    return logits.float().masked_fill(~way_mask.unsqueeze(1), MASKED_LOGIT)


def masked_means(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, N) values, (B, N) mask -> (B,) mean over each row's masked-in entries."""
    weights = mask.to(values.dtype)
    return (values * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)


def unstack_logits(logits: torch.Tensor, stack: EpisodeStack) -> list[torch.Tensor]:
    """(B, Q, W) padded query logits -> each episode's (Q_b, ways_b) logits."""
    return [
        logits[index, : len(ep.query_labels), : ep.ways] for index, ep in enumerate(stack.episodes)
    ]


def size_buckets(sizes: Sequence[int], ratio: float = 2.0) -> list[list[int]]:
    """Positions of `sizes` grouped so that within a group the largest is at most `ratio` times
    the smallest (sorted by size; padding a group to its largest then wastes less than half of
    it). Every position appears once."""
    if ratio < 1:
        raise ValueError(f"bucket ratio must be >= 1, got {ratio}")
    order = sorted(range(len(sizes)), key=lambda position: sizes[position])
    buckets: list[list[int]] = []
    for position in order:
        if buckets and sizes[position] <= ratio * max(sizes[buckets[-1][0]], 1):
            buckets[-1].append(position)
        else:
            buckets.append([position])
    return buckets
