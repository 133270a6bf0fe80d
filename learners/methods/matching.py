"""Matching Networks, simplest form (Meta-Dataset sec. 2): cosine attention over support labels.

p(y=k | x) = sum_i a(x, x_i) 1[y_i = k], a = softmax over the support set of cos(g(x), g(x_i))
(optionally times a fixed scale; 1 is the paper's form). Logits are log p, so cross-entropy on
them is the negative log-likelihood of that mixture.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from learners.config_fields import MethodConfig, option
from learners.episode_batch import EpisodeTensors
from learners.learner import Learner, embed_episode
from learners.prototypes import cosine_similarity_matrix
from learners.registry import register_learner


@dataclass
class MatchingConfig(MethodConfig):
    matching_scale: float = option(
        1.0, "softmax temperature on the cosine attention (1 is the paper's form)", above=0
    )


def matching_log_probs(
    query: torch.Tensor, support: torch.Tensor, labels: torch.Tensor, ways: int, scale: float
) -> torch.Tensor:
    """log p(y=k|x) for the cosine-attention classifier, computed in log space for stability."""
    log_attention = F.log_softmax(scale * cosine_similarity_matrix(query, support), dim=1)
    one_hot = F.one_hot(labels, ways).to(log_attention.dtype)  # (S, ways)
    masked = log_attention.unsqueeze(2) + torch.log(one_hot).unsqueeze(0)  # (Q, S, ways)
    return torch.logsumexp(masked, dim=1)


@register_learner("matching", options=MatchingConfig, spellings=("matchingnet",))
class MatchingNet(Learner):
    options: MatchingConfig

    def query_logits(self, ep: EpisodeTensors) -> torch.Tensor:
        support, query = embed_episode(self.backbone, ep)
        return matching_log_probs(
            query, support, ep.support_labels, ep.ways, self.options.matching_scale
        )
