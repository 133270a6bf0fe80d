"""Prototypical Networks (Snell et al.; Meta-Dataset sec. 2): softmax over -||g(x) - c_k||^2."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from learners.feed.episode_batch import EpisodeTensors
from learners.methods.config_fields import MethodConfig
from learners.methods.learner import Learner
from learners.methods.registry import register_learner
from learners.nn.prototypes import class_prototypes, prototype_logits

__all__ = ["ProtoNet", "ProtoNetConfig"]


@dataclass
class ProtoNetConfig(MethodConfig):
    """Prototypical Networks have no options of their own (backbone, optimiser, ... are shared)."""


@register_learner("protonet", options=ProtoNetConfig)
class ProtoNet(Learner):
    """Episodic training of the embedding with the prototype classifier."""

    def query_logits(self, ep: EpisodeTensors) -> torch.Tensor:
        support, query = self.embed_episode(ep)
        return prototype_logits(query, class_prototypes(support, ep.support_labels, ep.ways))
