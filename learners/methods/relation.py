"""Relation Networks (Sung et al.; Meta-Dataset sec. 2).

Support feature maps are averaged per class into prototypes; each (prototype, query) pair is
concatenated along channels and scored in [0, 1] by a learned relation module; the loss is the
mean squared error against the one-hot ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from learners.config_fields import MethodConfig, option
from learners.episode_batch import EpisodeTensors
from learners.learner import Learner
from learners.prototypes import class_prototypes
from learners.registry import register_learner


@dataclass
class RelationConfig(MethodConfig):
    relation_hidden: int = option(
        8, "hidden units of the relation module's fully connected layer", minimum=1
    )


class RelationModule(nn.Module):
    """Two conv3x3-BN-ReLU blocks on the concatenated maps, pooled, then FC-ReLU-FC-sigmoid."""

    def __init__(self, channels: int, hidden: int):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(2 * channels, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Linear(channels, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.head(self.convs(pairs).mean(dim=(2, 3)))).squeeze(-1)


@register_learner("relation", options=RelationConfig, spellings=("relationnet",))
class RelationNet(Learner):
    options: RelationConfig

    def add_modules(self) -> None:
        """The relation module, sized by the backbone's feature channels."""
        self.relation = RelationModule(self.backbone.feature_channels, self.options.relation_hidden)

    def query_logits(self, ep: EpisodeTensors) -> torch.Tensor:
        """Relation scores (Q, ways) in [0, 1]; their argmax is the prediction."""
        support, query = self.embed_episode(ep, maps=True)
        prototypes = class_prototypes(support, ep.support_labels, ep.ways)  # (ways, C, h, w)
        q, k = query.shape[0], ep.ways
        pairs = torch.cat(
            [
                prototypes.unsqueeze(0).expand(q, -1, -1, -1, -1),
                query.unsqueeze(1).expand(-1, k, -1, -1, -1),
            ],
            dim=2,
        )
        return self.relation(pairs.reshape(q * k, *pairs.shape[2:])).view(q, k)

    def episode_loss(self, ep: EpisodeTensors) -> torch.Tensor:
        scores = self.query_logits(ep)
        return F.mse_loss(scores, F.one_hot(ep.query_labels, ep.ways).to(scores.dtype))
