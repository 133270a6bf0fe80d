"""Relation Networks (Sung et al.; Meta-Dataset sec. 2).

Support feature maps are averaged per class into prototypes; each (prototype, query) pair is
concatenated along channels and scored in [0, 1] by a learned relation module; the loss is the
mean squared error against the one-hot ground truth.

`--relation-module reference` is Meta-Dataset's `relation_module` (functional_backbones.py):
2 x (conv3x3(64) - BN - ReLU - max-pool 2, the pool skipped once the maps are 1x1), flatten,
FC(8) - ReLU, FC(1) - sigmoid; `pooled` (what runs saved before this option built) keeps the
channels, averages the maps and needs no fixed map size. Meta-Dataset pairs it with the
`relationnet_cnn4` backbone (pooling in 3 of 4 layers) and transductive BatchNorm
(gin/learners/relationnet_config.gin: `transductive_batch_norm = True`, --batch-norm episode).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from learners.feed.episode_batch import EpisodeTensors
from learners.methods.config_fields import MethodConfig, option
from learners.methods.learner import Learner
from learners.methods.registry import register_learner
from learners.nn.batch_norm import EpisodeBatchNorm2d
from learners.nn.prototypes import class_prototypes

__all__ = [
    "ReferenceRelationModule",
    "RELATION_MODULES",
    "RelationConfig",
    "RelationModule",
    "RelationNet",
]

RELATION_MODULES = ("reference", "pooled")


@dataclass
class RelationConfig(MethodConfig):
    # Runs saved before --relation-module built the pooled module.
    legacy_defaults = {"relation_module": "pooled"}

    relation_hidden: int = option(
        8, "hidden units of the relation module's fully connected layer", minimum=1
    )
    relation_module: str = option(
        "reference",
        "reference (Meta-Dataset: 2 x conv-BN-ReLU-max-pool, FC, FC) or pooled (averaged maps)",
        choices=RELATION_MODULES,
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


class ReferenceRelationModule(nn.Module):
    """Meta-Dataset's relation module on (2C, h, w) pairs: 2 x (conv3x3(64)-BN-ReLU-pool),
    flatten, FC(hidden)-ReLU, FC(1)-sigmoid; sized by a dry run on the map size."""

    def __init__(self, channels: int, hidden: int, map_size: tuple[int, int], width: int = 64):
        super().__init__()
        blocks: list[nn.Module] = []
        in_channels, (height, breadth) = 2 * channels, map_size
        for _ in range(2):
            blocks += [
                nn.Conv2d(in_channels, width, 3, padding=1, bias=False),
                EpisodeBatchNorm2d(width, track_running_stats=False),
                nn.ReLU(),
            ]
            if height > 1:  # the reference skips the pool once the maps are reduced
                blocks.append(nn.MaxPool2d(2))
                height, breadth = max(1, height // 2), max(1, breadth // 2)
            in_channels = width
        self.convs = nn.Sequential(*blocks)
        self.head = nn.Sequential(
            nn.Linear(width * height * breadth, hidden), nn.ReLU(), nn.Linear(hidden, 1)
        )

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.head(self.convs(pairs).flatten(1))).squeeze(-1)


@register_learner("relation", options=RelationConfig, spellings=("relationnet",))
class RelationNet(Learner):
    options: RelationConfig
    loss_is_cross_entropy = False  # an MSE of relation scores: no ln(ways) chance level

    def add_modules(self) -> None:
        """The relation module, sized by the backbone's feature channels (and map size)."""
        channels, hidden = self.backbone.feature_channels, self.options.relation_hidden
        if self.options.relation_module == "pooled":
            self.relation: nn.Module = RelationModule(channels, hidden)
            return
        self.relation = ReferenceRelationModule(channels, hidden, self._map_size())

    def _map_size(self) -> tuple[int, int]:
        """(h, w) of the backbone's feature maps at the configured image size (dry run)."""
        was_training = self.backbone.training
        self.backbone.eval()
        with torch.no_grad():
            probe = torch.zeros(2, 3, self.config.image_size, self.config.image_size)
            shape = self.backbone.feature_map(probe).shape[-2:]
        self.backbone.train(was_training)
        return int(shape[0]), int(shape[1])

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
