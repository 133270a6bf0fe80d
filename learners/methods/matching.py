"""Matching Networks, simplest form (Meta-Dataset sec. 2): attention over support labels.

p(y=k | x) = sum_i a(x, x_i) 1[y_i = k], a = softmax over the support set of the similarity
g(x) . g(x_i) / ||g(x_i)||: as in Meta-Dataset's code only the support embeddings are
L2-normalised ("undocumented in the paper, but *very important*", MatchingNetworkLearner in
meta_dataset/learners/metric_learners.py, `tf.nn.l2_normalize(..., epsilon=1e-3)`), so the
query's norm acts as a learned temperature. `--matching-normalize both` is the exact cosine
(the reference's `exact_cosine_distance`, and what runs saved before this option ran).
Logits are log p, so cross-entropy on them is the negative log-likelihood of that mixture.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from learners import LearnerConfigError
from learners.feed.episode_batch import EpisodeTensors
from learners.methods.config_fields import MethodConfig, option
from learners.methods.learner import Learner
from learners.methods.registry import register_learner
from learners.nn.prototypes import tf_l2_normalize

__all__ = ["matching_log_probs", "MATCHING_NORMALIZATIONS", "MatchingConfig", "MatchingNet"]

MATCHING_NORMALIZATIONS = ("support", "both")


@dataclass
class MatchingConfig(MethodConfig):
    # Runs saved before --matching-normalize normalised both sides.
    legacy_defaults = {"matching_normalize": "both"}

    matching_scale: float = option(
        1.0, "factor on the similarities before the softmax (1: the reference's)", above=0
    )
    matching_normalize: str = option(
        "support",
        "L2-normalise the support embeddings only (Meta-Dataset's code) or both sides (cosine)",
        choices=MATCHING_NORMALIZATIONS,
    )


def matching_log_probs(
    query: torch.Tensor,
    support: torch.Tensor,
    labels: torch.Tensor,
    ways: int,
    scale: float,
    normalize: str = "both",
) -> torch.Tensor:
    """log p(y=k|x) of the attention classifier, computed in log space for stability."""
    if normalize not in MATCHING_NORMALIZATIONS:
        raise LearnerConfigError(f"--matching-normalize {normalize}: expected support or both")
    keys = tf_l2_normalize(support)
    queries = tf_l2_normalize(query) if normalize == "both" else query
    log_attention = F.log_softmax(scale * queries @ keys.t(), dim=1)
    one_hot = F.one_hot(labels, ways).to(log_attention.dtype)  # (S, ways)
    masked = log_attention.unsqueeze(2) + torch.log(one_hot).unsqueeze(0)  # (Q, S, ways)
    return torch.logsumexp(masked, dim=1)


@register_learner("matching", options=MatchingConfig, spellings=("matchingnet",))
class MatchingNet(Learner):
    options: MatchingConfig

    def query_logits(self, ep: EpisodeTensors) -> torch.Tensor:
        support, query = self.embed_episode(ep)
        return matching_log_probs(
            query,
            support,
            ep.support_labels,
            ep.ways,
            self.options.matching_scale,
            self.options.matching_normalize,
        )
