"""k-nearest-neighbour episode classifier on fixed features (Meta-Dataset's k-NN baseline)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from learners import LearnerConfigError
from learners.nn.prototypes import cosine_similarity_matrix, squared_euclidean

__all__ = ["knn_logits", "KNN_METRICS"]

KNN_METRICS = ("euclidean", "cosine")


def knn_logits(
    query: torch.Tensor,
    support: torch.Tensor,
    support_labels: torch.Tensor,
    ways: int,
    k: int = 1,
    metric: str = "euclidean",
) -> torch.Tensor:
    """(Q, ways) vote counts among the k nearest support examples.

    Each vote adds 1 plus 2^-(rank+2): classes with equal counts are ordered by their nearest
    neighbour among the k; with k = 1 this is the nearest-neighbour rule.
    """
    if metric not in KNN_METRICS:
        raise LearnerConfigError(f"unknown k-NN metric {metric!r}; expected one of {KNN_METRICS}")
    if k < 1:
        raise LearnerConfigError(f"k must be >= 1, got {k}")
    if metric == "euclidean":
        distance = squared_euclidean(query, support)
    else:
        distance = -cosine_similarity_matrix(query, support)
    k = min(k, support.shape[0])
    order = distance.topk(k, dim=1, largest=False).indices  # (Q, k), nearest first
    ranks = torch.arange(k, device=query.device, dtype=query.dtype)
    weights = 1.0 + 0.5 ** (ranks + 2)  # tie-breaks: each outweighs all later ones, sum < 1
    votes = F.one_hot(support_labels[order], ways).to(query.dtype) * weights.view(1, k, 1)
    return votes.sum(dim=1)
