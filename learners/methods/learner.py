"""The interface every method implements, and the pieces all methods share.

A learner is an `nn.Module` that owns a backbone and its optimiser: the base `__init__` builds
the backbone, calls `add_modules()` for what the method adds, then creates the optimiser. Episodic
methods implement `query_logits(episode_tensors)` (and optionally `episode_loss`);
`fit_episode(episode)` takes one training step and returns the loss, `predict(episode)` returns
query logits over the N ways.
Non-episodic methods (multiclass pre-training) train with `fit_batch(images, class_ids)`.
`self.config` holds the options every method shares, `self.options` the method's own.

A learner is built from a resolved config (`learners.methods.registry.build_learner` resolves
and builds): the registry knows the learner classes, the interface does not know the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from learners import LearnerConfigError
from learners.feed.episode_batch import EpisodeTensors, Normalization, episode_to_tensors
from learners.methods.config_fields import MethodConfig
from learners.methods.learner_config import LearnerConfig
from learners.nn.backbones import Backbone, build_backbone
from learners.nn.batch_norm import embed_support_query
from learners.optim.lr_schedule import apply_schedule
from learners.optim.mixed_precision import MixedPrecision, memory_format
from learners.optim.weight_decay import build_optimizer, decay_groups

__all__ = ["embed_episode", "input_normalization", "Learner", "make_optimizer"]


def make_optimizer(
    module: nn.Module, config: LearnerConfig, undecayed: Iterable[nn.Parameter] = ()
) -> torch.optim.Optimizer:
    """Adam or Nesterov SGD, weight decay coupled or decoupled (`--weight-decay-form`,
    `learners.optim.weight_decay`); BatchNorm parameters, biases and `undecayed` are excluded from
    weight decay."""
    groups = decay_groups(module, config.weight_decay, undecayed)
    return build_optimizer(groups, config.optimizer, config.lr, config.weight_decay_form)


def input_normalization(scaling: str) -> Normalization:
    """ImageNet mean/std, or (x - 0.5) / 0.5 = 2x - 1 (Meta-Dataset's [-1, 1])."""
    if scaling == "meta-dataset":
        return Normalization(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
    return Normalization()


def embed_episode(
    embed: Callable[[torch.Tensor], torch.Tensor], ep: EpisodeTensors
) -> tuple[torch.Tensor, torch.Tensor]:
    """Embed support and query images in one pass (one BatchNorm batch); returns (support,
    query) outputs of `embed` (a backbone, or its `feature_map`)."""
    features = embed(torch.cat([ep.support_images, ep.query_images]))
    return features[: len(ep.support_labels)], features[len(ep.support_labels) :]


class Learner(nn.Module):
    """Base class: builds the backbone, owns the optimiser and converts episodes; subclasses
    define the method."""

    stream: ClassVar[str] = "episodes"  # or "batches" for non-episodic training
    # The BatchNorm convention when --batch-norm is not given (learners.nn.batch_norm): running
    # averages, or each set's own moments for MAML-style learners.
    default_batch_norm: ClassVar[str] = "running"
    # A cross-entropy training loss sits at ln(classes) when the network learns nothing
    # (learners.training.loss_watch); False for a method whose loss is another (an MSE).
    loss_is_cross_entropy: ClassVar[bool] = True

    def __init__(self, config: LearnerConfig):
        super().__init__()
        if config.options is None:
            raise ValueError(
                f"{type(self).__name__}: a config without its method's options; build learners "
                "with learners.methods.registry.build_learner, which resolves the config"
            )
        self.config = config
        self.options: MethodConfig = self.config.options  # the method's own (its dataclass)
        self.normalization = input_normalization(self.config.input_scaling)
        self.optimizer: torch.optim.Optimizer | None = None
        self.precision = MixedPrecision()
        self.memory_format = torch.contiguous_format
        self.batch_norm = self.config.batch_norm or self.default_batch_norm
        self.backbone: Backbone = build_backbone(
            self.config.backbone_config(track_running_stats=self.batch_norm == "running")
        )
        self.add_modules()
        self.optimizer = make_optimizer(self, self.config, self.undecayed_parameters())

    def add_modules(self) -> None:
        """Hook: the method's own modules and state, built after the backbone and before the
        optimiser (which then covers them); the base learner adds none."""

    def undecayed_parameters(self) -> list[nn.Parameter]:
        """Hook: weights (ndim > 1) the optimiser leaves without weight decay, as the method's
        reference does; the base learner has none."""
        return []

    def embed_episode(self, ep: EpisodeTensors, maps: bool = False) -> tuple[torch.Tensor, ...]:
        """(support, query) features (or feature maps) under the run's BatchNorm convention."""
        embed = self.backbone.feature_map if maps else self.backbone
        return embed_support_query(
            embed, self.backbone, ep.support_images, ep.query_images, self.batch_norm
        )

    def switch_batch_norm(self, mode: str) -> None:
        """Use the trained weights under another BatchNorm convention (`learners.evaluate
        --batch-norm`): `support` or `episode` drop the running averages; `running` needs them
        (ValueError for a run trained without)."""
        if mode == self.batch_norm:
            return
        norms = [
            m for m in self.backbone.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)
        ]
        if mode == "running" and any(m.running_mean is None for m in norms):
            raise LearnerConfigError(
                f"--batch-norm running: this run was trained with --batch-norm {self.batch_norm}, "
                "so it has no running averages"
            )
        if mode != "running":
            for norm in norms:
                norm.track_running_stats = False
                norm.running_mean = norm.running_var = norm.num_batches_tracked = None
        self.batch_norm = mode

    def schedule_step(self, step: int, total_steps: int) -> float:
        """Set the learning rate of training step `step` (1-based) from the run's schedule
        (`learners.optim.lr_schedule`); returns it."""
        assert self.optimizer is not None
        return apply_schedule(self.optimizer, self.config.schedule(), step, total_steps)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def set_precision(self, amp: str = "off", channels_last: bool = False) -> None:
        """Train with `amp` (off, bf16, fp16) and NHWC weights/images (call after `.to`)."""
        self.precision = MixedPrecision(amp, self.device.type)
        self.memory_format = memory_format(channels_last)
        self.to(memory_format=self.memory_format)

    def to_tensors(self, episode: Any) -> EpisodeTensors:
        return episode_to_tensors(
            episode,
            self.device,
            self.normalization,
            image_size=self.config.image_size,
            memory_format=self.memory_format,
        )

    # --- episodic interface -------------------------------------------------------------
    def query_logits(self, ep: EpisodeTensors) -> torch.Tensor:
        """(Q, ways) logits for the query set, differentiable when grad is enabled."""
        raise NotImplementedError

    def episode_loss(self, ep: EpisodeTensors) -> torch.Tensor:
        """Meta-training loss: cross-entropy of query predictions (the usual episodic loss)."""
        return F.cross_entropy(self.query_logits(ep), ep.query_labels)

    def fit_episode(self, episode: Any) -> float:
        """One optimiser step on one training episode; returns the loss before the step."""
        ep = self.to_tensors(episode)
        self.train()
        assert self.optimizer is not None
        self.optimizer.zero_grad(set_to_none=True)
        with self.precision.autocast():
            loss = self.episode_loss(ep)
        self.precision.backward_and_step(loss, self.optimizer)
        return float(loss.detach())

    def predict(self, episode: Any) -> torch.Tensor:
        """Query logits over the episode's N ways (evaluation mode, detached)."""
        ep = self.to_tensors(episode)
        self.eval()
        with torch.no_grad():
            return self.query_logits(ep).detach()

    # --- batch interface ----------------------------------------------------------------
    def fit_batch(self, images: np.ndarray, class_ids: np.ndarray) -> float:
        raise NotImplementedError(f"{type(self).__name__} trains from episodes, not batches")

    def batch_loss(self, images: np.ndarray, class_ids: np.ndarray) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} trains from episodes, not batches")

    def item_loss(self, item: Any) -> torch.Tensor:
        """The training loss of one stream item (episode, or (images, ids) batch) in training
        mode, with no optimiser step: what a meta-batch step (`learners.training.meta_batch`) sums."""
        self.train()
        if self.stream == "batches":
            images, class_ids = item
            return self.batch_loss(images, class_ids)
        ep = self.to_tensors(item)
        with self.precision.autocast():
            return self.episode_loss(ep)

    def train_step(self, item: Any) -> float:
        """One step on what the training stream yields (an episode or an (images, ids) batch)."""
        if self.stream == "batches":
            images, class_ids = item
            return self.fit_batch(images, class_ids)
        return self.fit_episode(item)
