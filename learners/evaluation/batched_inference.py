"""Query logits of many episodes per call (`learners.evaluate --episodes-per-batch`, issue 22).

Which batching a learner gets:
- multiclass runs with fine-tuning inference (`finetune`, `transductive`): one copy of the
  network per episode, fine-tuned together (`learners.inference.batched_finetune`: under vmap on
  accelerators, one call per copy on the CPU, with one augmentation call and one Adam step);
- the MAML family: the evaluation inner loop of all episodes at once (`learners.inference.batched_maml`;
  on accelerators: on the CPU, where vmap's grouped convolutions are slower, one at a time);
- every learner whose backbone treats images independently at evaluation (BatchNorm with running
  statistics: ProtoNet, Matching, Relation, multiclass protonet/knn/support_init): one backbone
  pass over all episodes' images, then the learner's own `query_logits` per episode on those
  feature maps (a stand-in backbone that only pools them), so method changes carry over;
- anything else: one episode at a time.
All paths give each episode the results it gets alone (up to float rounding).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import nn

from learners.feed.episode_batch import EpisodeTensors
from learners.inference.batched_finetune import batched_finetune_query_logits, resolved_stacking
from learners.inference.finetune_augment import augmentation_generator
from learners.methods.learner import Learner
from learners.nn.backbones import Backbone

__all__ = [
    "Autocast",
    "batched_query_logits",
    "batching_kind",
    "FINETUNE_INFERENCES",
    "images_independent",
    "MAML_METHODS",
    "one_at_a_time_logits",
    "PrecomputedMaps",
    "shared_backbone_logits",
    "swapped_backbone",
]

FINETUNE_INFERENCES = ("finetune", "transductive")
MAML_METHODS = ("maml", "fomaml", "anil", "protomaml", "foprotomaml")

Autocast = Callable[[], AbstractContextManager[Any]]


class PrecomputedMaps(Backbone):
    """A backbone whose 'images' are already the real backbone's feature maps: `feature_map` is
    the identity and `forward` pools them as the real one does."""

    def __init__(self, real: Backbone, device: torch.device):
        super().__init__()
        self.flatten_features = real.flatten_features
        self.out_dim = real.out_dim
        self.feature_channels = getattr(real, "feature_channels", None)
        # A parameter on the device, so `learner.device` still answers during the swap.
        self.anchor = nn.Parameter(torch.zeros(0, device=device), requires_grad=False)

    def feature_map(self, images: torch.Tensor) -> torch.Tensor:
        return images


@contextlib.contextmanager
def swapped_backbone(learner: Learner, backbone: nn.Module) -> Iterator[None]:
    """Within the block `learner.backbone` is `backbone`; the real one is put back after."""
    real = learner.backbone
    learner.backbone = backbone
    try:
        yield
    finally:
        learner.backbone = real


def images_independent(module: nn.Module) -> bool:
    """Whether `module` (in its current mode) maps each image on its own: every BatchNorm in
    evaluation mode with running statistics (so stacking episodes changes nothing)."""
    for child in module.modules():
        if isinstance(child, nn.modules.batchnorm._BatchNorm):
            if child.training or child.running_mean is None:
                return False
    return True


def batching_kind(learner: Learner) -> str:
    """'finetune', 'maml', 'shared_backbone' or 'none' (see the module docstring)."""
    inference = getattr(learner.options, "inference", None)
    if learner.config.method in MAML_METHODS:
        # The batched inner loop normalises each set by its own moments (--batch-norm episode);
        # the other conventions go one episode at a time.
        return "maml" if learner.batch_norm == "episode" else "none"
    if inference in FINETUNE_INFERENCES:
        return "finetune"
    was_training = learner.training
    learner.eval()
    independent = images_independent(learner.backbone)
    learner.train(was_training)
    return "shared_backbone" if independent else "none"


def shared_backbone_logits(
    learner: Learner, episodes: Sequence[EpisodeTensors], autocast: Autocast
) -> list[torch.Tensor]:
    """One backbone pass over every episode's images, then the learner's `query_logits` on
    each episode's slice of the feature maps."""
    images = [t for ep in episodes for t in (ep.support_images, ep.query_images)]
    with torch.no_grad(), autocast():
        maps = learner.backbone.feature_map(torch.cat(images)).float()
    stand_in = PrecomputedMaps(learner.backbone, maps.device)
    results, start = [], 0
    with torch.no_grad(), swapped_backbone(learner, stand_in):
        for ep in episodes:
            support, query = len(ep.support_labels), len(ep.query_labels)
            mapped = dataclasses.replace(
                ep,
                support_images=maps[start : start + support],
                query_images=maps[start + support : start + support + query],
            )
            start += support + query
            with autocast():
                results.append(learner.query_logits(mapped).detach().float())
    return results


def one_at_a_time_logits(
    learner: Learner,
    episodes: Sequence[EpisodeTensors],
    generators: Sequence[torch.Generator],
    autocast: Autocast,
) -> list[torch.Tensor]:
    """Today's loop: `learner.predict` per episode, its augmentation drawn from its generator."""
    results = []
    for ep, generator in zip(episodes, generators):
        with augmentation_generator(generator), autocast():
            results.append(learner.predict(ep).float())
    return results


def batched_query_logits(
    learner: Learner,
    episodes: Sequence[EpisodeTensors],
    generators: Sequence[torch.Generator],
    autocast: Autocast = contextlib.nullcontext,
    stacking: str = "auto",
) -> list[torch.Tensor]:
    """Each episode's (Q, ways) query logits, computed together where the learner allows.
    `stacking` (see `learners.inference.batched_finetune.resolved_stacking`): how per-episode copies
    run; the MAML family is batched only with `vmap` (its `loop` is one at a time)."""
    if len(episodes) == 1:
        return one_at_a_time_logits(learner, episodes, generators, autocast)
    learner.eval()
    kind = batching_kind(learner)
    stacking = resolved_stacking(stacking, learner.device)
    if kind == "finetune":
        options = learner.finetune_options(transductive=learner.options.inference == "transductive")
        return batched_finetune_query_logits(
            learner.network(),
            episodes,
            options,
            learner.normalization,
            generators,
            autocast,
            stacking,
        )
    if kind == "maml" and stacking == "vmap":
        from learners.inference.batched_maml import batched_maml_query_logits

        return batched_maml_query_logits(learner, episodes, autocast)
    if kind == "shared_backbone":
        return shared_backbone_logits(learner, episodes, autocast)
    return one_at_a_time_logits(learner, episodes, generators, autocast)
