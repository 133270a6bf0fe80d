"""MAML family (Meta-Dataset sec. 2): MAML, first-order MAML, ANIL and Proto-MAML.

A linear head (W, b) on the embedding g(.; theta) is adapted on the support set by `inner_steps`
SGD steps of size `inner_lr`; the query loss of the adapted model trains theta. Because ways vary
per episode the head is not meta-learned: it starts at zero (MAML, ANIL) or at the Prototypical
Network-equivalent layer W_k = 2 c_k, b_k = -||c_k||^2 with gradients flowing through that
initialisation (Proto-MAML). ANIL adapts only the head (Raghu et al.; ATG sec. 3).
BatchNorm's scale and offset stay fixed in the inner loop unless --adapt-batch-norm (Meta-Dataset's
`MAMLLearner.adapt_batch_norm = False`, gin/learners/maml_config.gin; runs saved before the option
adapted them and keep doing so). BatchNorm moments: each set's own by default (--batch-norm
episode, as usual for MAML); --batch-norm support normalises the query with the support set's
moments under the adapted weights (Meta-Dataset).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from learners.feed.episode_batch import EpisodeTensors
from learners.methods.config_fields import MethodConfig, option
from learners.methods.learner import Learner
from learners.methods.registry import register_learner
from learners.nn.batch_norm import recording, replaying
from learners.nn.inner_loop import Params, sgd_adapt
from learners.nn.prototypes import class_prototypes, prototype_linear_layer

__all__ = [
    "batch_norm_parameter_names",
    "default_inner_lr",
    "HEAD_BIAS",
    "HEAD_WEIGHT",
    "MAML",
    "MAML_VARIANTS",
    "MamlConfig",
    "MamlVariant",
]

HEAD_WEIGHT = "head.weight"
HEAD_BIAS = "head.bias"


@dataclass(frozen=True)
class MamlVariant:
    """Which parameters adapt, how the head starts, and whether second-order terms are kept."""

    first_order: bool
    adapt_backbone: bool
    head_init: str  # "zeros" or "prototypes"


# Meta-Dataset appendix .11: fo-MAML prefers inner lr ~0.1, fo-Proto-MAML a much smaller one.
MAML_VARIANTS = {
    "maml": MamlVariant(first_order=False, adapt_backbone=True, head_init="zeros"),
    "fomaml": MamlVariant(first_order=True, adapt_backbone=True, head_init="zeros"),
    "anil": MamlVariant(first_order=False, adapt_backbone=False, head_init="zeros"),
    "protomaml": MamlVariant(first_order=False, adapt_backbone=True, head_init="prototypes"),
    "foprotomaml": MamlVariant(first_order=True, adapt_backbone=True, head_init="prototypes"),
}


def default_inner_lr(variant: MamlVariant) -> float:
    """Inner-loop step size when none is given: 0.01 for Proto-MAML variants, else 0.1."""
    return 0.01 if variant.head_init == "prototypes" else 0.1


@dataclass
class MamlConfig(MethodConfig):
    """The inner loop (Meta-Dataset sec. 2): SGD steps on the support set."""

    # Runs saved before --adapt-batch-norm adapted BatchNorm.
    legacy_defaults = {"adapt_batch_norm": True}

    inner_steps: int = option(5, "inner-loop SGD steps on the support set", minimum=0)
    inner_lr: float | None = option(
        None, "inner-loop step size (default 0.1, or 0.01 for Proto-MAML)", above=0
    )
    eval_inner_steps: int | None = option(
        None,
        "inner-loop steps at evaluation (default --inner-steps)",
        minimum=0,
        at_evaluation=True,
    )
    adapt_batch_norm: bool = option(
        False,
        "adapt BatchNorm's scale and offset in the inner loop (Meta-Dataset: no)",
    )

    def resolved(self, method: str) -> MamlConfig:
        """The variant's default step size and evaluation steps filled in."""
        inner_lr = self.inner_lr
        if inner_lr is None:
            inner_lr = default_inner_lr(MAML_VARIANTS[method])
        eval_steps = self.inner_steps if self.eval_inner_steps is None else self.eval_inner_steps
        return replace(self, inner_lr=inner_lr, eval_inner_steps=eval_steps)


@register_learner("maml", options=MamlConfig)
@register_learner("fomaml", options=MamlConfig, spellings=("fo_maml",))
@register_learner("anil", options=MamlConfig)
@register_learner("protomaml", options=MamlConfig, spellings=("proto_maml",))
@register_learner("foprotomaml", options=MamlConfig, spellings=("fo_protomaml",))
class MAML(Learner):
    """The MAML family; which variant runs is the registered name (`config.method`)."""

    options: MamlConfig
    default_batch_norm = "episode"

    def add_modules(self) -> None:
        """No module of its own (the head is per episode): the variant and its inner step size."""
        self.variant = MAML_VARIANTS[self.config.method]
        default_lr = default_inner_lr(self.variant)
        self.inner_lr = self.options.inner_lr if self.options.inner_lr is not None else default_lr

    def evaluation_steps(self) -> int:
        """Inner-loop steps at evaluation: --eval-inner-steps, else --inner-steps."""
        steps = self.options.eval_inner_steps
        return self.options.inner_steps if steps is None else steps

    def adapted_backbone_names(self) -> set[str]:
        """The backbone parameters the inner loop adapts: none (ANIL), every one, or every one
        but BatchNorm's scale and offset (without --adapt-batch-norm)."""
        if not self.variant.adapt_backbone:
            return set()
        names = {name for name, _ in self.backbone.named_parameters()}
        if self.options.adapt_batch_norm:
            return names
        return names - batch_norm_parameter_names(self.backbone)

    def _features(self, params: Params, images: torch.Tensor) -> torch.Tensor:
        backbone_params = {k: v for k, v in params.items() if not k.startswith("head.")}
        return functional_call(self.backbone, backbone_params, (images,))

    def _logits(self, params: Params, images: torch.Tensor) -> torch.Tensor:
        return F.linear(self._features(params, images), params[HEAD_WEIGHT], params[HEAD_BIAS])

    def initial_head(self, ep: EpisodeTensors) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero head, or the prototype-equivalent linear layer (differentiable in theta)."""
        if self.variant.head_init == "prototypes":
            support = self.backbone(ep.support_images)
            return prototype_linear_layer(class_prototypes(support, ep.support_labels, ep.ways))
        dim = self.backbone.out_dim
        weight = torch.zeros(ep.ways, dim, device=self.device, requires_grad=True)
        bias = torch.zeros(ep.ways, device=self.device, requires_grad=True)
        return weight, bias

    def adapt(self, ep: EpisodeTensors, steps: int, first_order: bool) -> Params:
        """Inner loop on the support set; returns backbone (adapted or not) and head tensors."""
        weight, bias = self.initial_head(ep)
        fast: Params = {HEAD_WEIGHT: weight, HEAD_BIAS: bias}
        fixed: Params = {}
        adapted = self.adapted_backbone_names()
        for name, parameter in self.backbone.named_parameters():
            (fast if name in adapted else fixed)[name] = parameter
        if not self.variant.adapt_backbone:
            support_features = self.backbone(ep.support_images)

            def support_loss(p: Params) -> torch.Tensor:
                logits = F.linear(support_features, p[HEAD_WEIGHT], p[HEAD_BIAS])
                return F.cross_entropy(logits, ep.support_labels)

        else:

            def support_loss(p: Params) -> torch.Tensor:
                return F.cross_entropy(self._logits(p, ep.support_images), ep.support_labels)

        return {**fixed, **sgd_adapt(support_loss, fast, steps, self.inner_lr, first_order)}

    def adapted_query_logits(self, params: Params, ep: EpisodeTensors) -> torch.Tensor:
        """Query logits of the adapted model; under --batch-norm support the query is
        normalised with the moments of the support set under the adapted weights."""
        if self.batch_norm != "support":
            return self._logits(params, ep.query_images)
        with recording(self.backbone):
            self._features(params, ep.support_images)
        with replaying(self.backbone):
            return self._logits(params, ep.query_images)

    def query_logits(self, ep: EpisodeTensors) -> torch.Tensor:
        if self.training:
            params = self.adapt(ep, self.options.inner_steps, self.variant.first_order)
            return self.adapted_query_logits(params, ep)
        steps = self.evaluation_steps()
        with torch.enable_grad():  # adaptation needs gradients even at evaluation time
            params = self.adapt(ep, steps, first_order=True)
            return self.adapted_query_logits(params, ep).detach()


def batch_norm_parameter_names(module: nn.Module) -> set[str]:
    """Qualified names of the scale and offset of every BatchNorm layer in `module`."""
    return {
        f"{prefix}.{name}" if prefix else name
        for prefix, layer in module.named_modules()
        if isinstance(layer, nn.modules.batchnorm._BatchNorm)
        for name, _ in layer.named_parameters(recurse=False)
    }
