"""Multiclass pre-training (cross-entropy over all training classes) and its episode inference.

Training: label smoothing as in Dhillon et al. A.2 (1 - eps on the true class, eps / (K - 1)
elsewhere; `--label-smoothing-form uniform`: eps / K on every class, as fastai's
`LabelSmoothingCrossEntropy` in the authors' pretrain.py), mixup (Zhang et al.;
lambda ~ Beta(alpha, alpha), drawn per sample and folded to max(lambda, 1 - lambda) as fastai's
MixUpCallback does for the authors' pretrain.py) and, with
`pretrain_augment`, the augmentation of A.4, "the same for both pre-training and fine-tuning".
Meta-Dataset's and ATG's baselines pre-train with plain cross-entropy and no augmentation
(`--label-smoothing 0 --mixup-alpha 0 --no-pretrain-augment`, their recipes); Meta-Dataset's
classifier is a weight-normalised cosine one (`--pretrain-head cosine --pretrain-weight-norm`,
`learners.nn.pretrain_head`; the default stays a linear layer). Inference on an episode uses
the feature extractor (network without its last linear layer) with the prototype classifier or
k-NN, or the whole network's logits for support-based initialisation and (transductive)
fine-tuning.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from learners import LearnerConfigError
from learners.feed.episode_batch import EpisodeTensors, images_to_tensor
from learners.inference.finetune import (
    DHILLON_BN_MICRO_BATCH,
    CosineHead,
    FinetuneOptions,
    finetune_query_logits,
)
from learners.inference.finetune_augment import augment_images
from learners.inference.knn import KNN_METRICS, knn_logits
from learners.inference.md_finetune import MDFinetuneOptions, md_finetune_query_logits
from learners.methods.config_fields import MethodConfig, option
from learners.methods.learner import Learner
from learners.methods.registry import register_learner
from learners.nn.pretrain_head import (
    HEADS,
    HeadOptions,
    MetaDatasetClassifier,
    pretrain_classifier,
)
from learners.nn.prototypes import class_prototypes, prototype_logits

__all__ = [
    "INFERENCES",
    "LABEL_SMOOTHING_FORMS",
    "mixup_lambdas",
    "MulticlassConfig",
    "MulticlassLearner",
    "smoothed_targets",
    "soft_cross_entropy",
]

INFERENCES = ("protonet", "knn", "support_init", "finetune", "transductive", "md_finetune")
# How label smoothing spreads eps: Dhillon et al. A.2's text (eps / (K - 1) on each other class),
# or fastai v1's LabelSmoothingCrossEntropy, which pretrain.py:68 trains with (eps / K on all).
LABEL_SMOOTHING_FORMS = ("paper", "uniform")


@dataclass
class MulticlassConfig(MethodConfig):
    """Pre-training (Dhillon et al. sec. 4, A.2, A.4) and the episode inference (sec. 3, A.3)."""

    # Runs saved before --mixup-per-sample drew one lambda per batch; before
    # --finetune-bn-micro-batch, fine-tuning normalised a whole set as one BatchNorm batch;
    # before --label-smoothing-form, smoothing put eps / (K - 1) off the label.
    legacy_defaults = {
        "mixup_per_sample": False,
        "finetune_bn_micro_batch": 0,
        "label_smoothing_form": "paper",
    }

    label_smoothing: float = option(
        0.1, "label smoothing epsilon (Dhillon et al. A.2: 0.1; 0 turns it off)", minimum=0, below=1
    )
    label_smoothing_form: str = option(
        "paper",
        "paper: 1 - eps on the label, eps / (K - 1) on each other class (Dhillon et al. A.2); "
        "uniform: eps / K on every class besides 1 - eps on the label (fastai, pretrain.py)",
        choices=LABEL_SMOOTHING_FORMS,
    )
    mixup_alpha: float = option(
        0.25, "mixup Beta(alpha, alpha) (Dhillon et al. A.2: 0.25; 0 turns it off)", minimum=0
    )
    mixup_per_sample: bool = option(
        True, "one mixup lambda per sample, max(l, 1 - l) (fastai); else one per batch"
    )
    pretrain_augment: bool = option(
        True, "pre-train on batches with the augmentation of Dhillon et al. A.4"
    )
    pretrain_head: str = option(
        "linear",
        "classifier over the training classes: linear (x W + b), or cosine (Meta-Dataset's "
        "cosine_classifier: scale * cos(x, w_c), no bias)",
        choices=HEADS,
    )
    pretrain_cosine_scale: float = option(
        10.0,
        "multiplier of the cosine logits (Meta-Dataset's cosine_logits_multiplier; used by "
        "--pretrain-head cosine only, so that a recipe's head can be overridden alone)",
        above=0,
    )
    pretrain_weight_norm: bool = option(
        False,
        "weight-normalised classifier, w_c = g_c v_c / |v_c|, g and b set from the first batch "
        "(Meta-Dataset's use_weight_norm)",
    )
    inference: str = option(
        "protonet",
        "episode inference (the methods knn, support_init, finetune, transductive fix it)",
        choices=INFERENCES,
        at_evaluation=True,
    )
    knn_k: int = option(1, "neighbours of the k-NN inference", minimum=1, at_evaluation=True)
    knn_metric: str = option(
        "euclidean", "distance of the k-NN inference", choices=KNN_METRICS, at_evaluation=True
    )
    finetune_epochs: int = option(
        25, "fine-tuning epochs (Dhillon et al. A.3: 25)", minimum=0, at_evaluation=True
    )
    finetune_lr: float = option(
        5e-5, "fine-tuning learning rate (Dhillon et al. A.3)", above=0, at_evaluation=True
    )
    finetune_relu: bool = option(
        True, "ReLU on the logits of the cosine head (eqs. 6-7)", at_evaluation=True
    )
    entropy_log_ways: bool = option(
        False,
        "divide the transductive entropy term by log(ways) (Dhillon et al. App. C)",
        at_evaluation=True,
    )
    finetune_freeze_bn: bool = option(
        False,
        "fine-tune with BatchNorm's pre-training statistics (the authors' code: batch statistics)",
        at_evaluation=True,
    )
    finetune_augment: bool = option(
        True, "fine-tune with the augmentation of Dhillon et al. A.4", at_evaluation=True
    )
    finetune_bn_micro_batch: int = option(
        DHILLON_BN_MICRO_BATCH,
        "fine-tune with BatchNorm statistics per chunk of this many images of a shuffled set "
        "(the authors' micro_forward: 75); 0: the whole set as one batch",
        minimum=0,
        at_evaluation=True,
    )
    md_finetune_steps: int = option(
        100, "Meta-Dataset Finetune: steps on the support set", minimum=0, at_evaluation=True
    )
    md_finetune_lr: float = option(
        0.01, "Meta-Dataset Finetune: learning rate", above=0, at_evaluation=True
    )
    md_finetune_adam: bool = option(
        True, "Meta-Dataset Finetune: Adam (else gradient descent)", at_evaluation=True
    )
    md_finetune_all_layers: bool = option(
        False, "Meta-Dataset Finetune: fine-tune the embedding too", at_evaluation=True
    )
    md_finetune_cosine: bool = option(
        True, "Meta-Dataset Finetune: cosine classifier head", at_evaluation=True
    )
    md_finetune_weight_norm: bool = option(
        True, "Meta-Dataset Finetune: weight-normalised head", at_evaluation=True
    )
    md_finetune_multiplier: float = option(
        10.0, "Meta-Dataset Finetune: cosine logits multiplier", above=0, at_evaluation=True
    )
    train_class_ids: list[int] = option(
        [], "the training classes (learners.train fills them from the split)", cli=False
    )

    def head_options(self) -> HeadOptions:
        return HeadOptions(
            self.pretrain_head, self.pretrain_cosine_scale, self.pretrain_weight_norm
        )

    def md_finetune_options(self) -> MDFinetuneOptions:
        return MDFinetuneOptions(
            steps=self.md_finetune_steps,
            lr=self.md_finetune_lr,
            adam=self.md_finetune_adam,
            all_layers=self.md_finetune_all_layers,
            cosine=self.md_finetune_cosine,
            weight_norm=self.md_finetune_weight_norm,
            cosine_multiplier=self.md_finetune_multiplier,
        )


def mixup_lambdas(batch: int, alpha: float, per_sample: bool) -> torch.Tensor:
    """Mixup weights of the first image of each pair: one Beta(alpha, alpha) draw for the batch,
    or one per sample folded to max(l, 1 - l) (fastai's MixUpCallback)."""
    beta = torch.distributions.Beta(torch.tensor(float(alpha)), torch.tensor(float(alpha)))
    if not per_sample:
        return beta.sample().expand(batch)
    draws = beta.sample((batch,))
    return torch.maximum(draws, 1 - draws)


def smoothed_targets(
    indices: torch.Tensor, classes: int, epsilon: float, form: str = "paper"
) -> torch.Tensor:
    """Target rows of the labels `indices` over `classes`: `paper` puts 1 - eps on the label and
    eps / (classes - 1) on every other class (Dhillon et al. A.2); `uniform` puts eps / classes on
    every class and 1 - eps + eps / classes on the label (fastai v1 LabelSmoothingCrossEntropy:
    eps / K * sum_k -log p_k + (1 - eps) * -log p_y). Each row sums to 1."""
    if form == "uniform":
        off, on = epsilon / classes, 1.0 - epsilon + epsilon / classes
    elif form == "paper":
        off, on = epsilon / max(classes - 1, 1), 1.0 - epsilon
    else:
        raise LearnerConfigError(
            f"--label-smoothing-form {form}: expected one of {', '.join(LABEL_SMOOTHING_FORMS)}"
        )
    targets = torch.full((indices.shape[0], classes), off, device=indices.device)
    return targets.scatter_(1, indices.unsqueeze(1), on)


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return -(targets * F.log_softmax(logits, dim=1)).sum(dim=1).mean()


@register_learner("multiclass", options=MulticlassConfig)
@register_learner("knn", options=MulticlassConfig, fixed={"inference": "knn"})
@register_learner("finetune", options=MulticlassConfig, fixed={"inference": "finetune"})
@register_learner(
    "transductive",
    options=MulticlassConfig,
    fixed={"inference": "transductive"},
    spellings=("transductive_finetune",),
)
@register_learner("support_init", options=MulticlassConfig, fixed={"inference": "support_init"})
@register_learner("md_finetune", options=MulticlassConfig, fixed={"inference": "md_finetune"})
class MulticlassLearner(Learner):
    """Backbone + classifier over `options.train_class_ids` (linear, or Meta-Dataset's cosine /
    weight-normalised one: `learners.nn.pretrain_head`), trained on (images, ids) batches."""

    stream = "batches"
    options: MulticlassConfig

    def undecayed_parameters(self) -> list[nn.Parameter]:
        """The direction v of a weight-normalised classifier (`learners.nn.pretrain_head`)."""
        if isinstance(self.classifier, MetaDatasetClassifier):
            return self.classifier.undecayed_parameters()
        return []

    def add_modules(self) -> None:
        """The classifier over the training classes and the sorted table of their ids."""
        class_ids = self.options.train_class_ids
        if len(class_ids) < 2:
            raise LearnerConfigError(
                "multiclass pre-training needs the list of >= 2 training class ids"
            )
        self.classifier = pretrain_classifier(
            self.backbone.out_dim, len(class_ids), self.options.head_options()
        )
        ids = torch.tensor(sorted(class_ids), dtype=torch.long)
        self.register_buffer("class_id_table", ids, persistent=False)

    def network(self) -> nn.Module:
        """Images -> logits over the training classes (the backbone plus its last linear layer)."""
        return nn.Sequential(self.backbone, self.classifier)

    def class_indices(self, class_ids: np.ndarray) -> torch.Tensor:
        ids = torch.as_tensor(np.asarray(class_ids), dtype=torch.long, device=self.device)
        positions = torch.searchsorted(self.class_id_table, ids)
        positions = positions.clamp(max=len(self.class_id_table) - 1)
        unknown = self.class_id_table[positions] != ids
        if bool(unknown.any()):
            raise ValueError(f"class ids {ids[unknown].tolist()} are not training classes")
        return positions

    def fit_batch(self, images: np.ndarray, class_ids: np.ndarray) -> float:
        """One optimiser step of (smoothed, optionally mixup) cross-entropy on a batch."""
        assert self.optimizer is not None
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.batch_loss(images, class_ids)
        self.precision.backward_and_step(loss, self.optimizer)
        return float(loss.detach())

    def batch_loss(self, images: np.ndarray, class_ids: np.ndarray) -> torch.Tensor:
        """(Smoothed, optionally mixup) cross-entropy on a batch, no optimiser step."""
        self.train()
        inputs = images_to_tensor(
            images, self.device, self.normalization, self.config.image_size, self.memory_format
        )
        if self.options.pretrain_augment:
            inputs = augment_images(inputs, self.normalization).contiguous(
                memory_format=self.memory_format
            )
        targets = smoothed_targets(
            self.class_indices(class_ids),
            len(self.class_id_table),
            self.options.label_smoothing,
            self.options.label_smoothing_form,
        )
        if self.options.mixup_alpha > 0:
            mix = mixup_lambdas(
                inputs.shape[0], self.options.mixup_alpha, self.options.mixup_per_sample
            ).to(self.device)
            perm = torch.randperm(inputs.shape[0]).to(self.device)
            inputs = mix.view(-1, 1, 1, 1) * inputs + (1 - mix.view(-1, 1, 1, 1)) * inputs[perm]
            targets = mix.view(-1, 1) * targets + (1 - mix.view(-1, 1)) * targets[perm]
        with self.precision.autocast():
            return soft_cross_entropy(self.classifier(self.backbone(inputs)), targets)

    def fit_episode(self, episode: object) -> float:
        raise NotImplementedError("multiclass pre-training trains from batches (fit_batch)")

    def predicted_class_ids(self, images: np.ndarray) -> np.ndarray:
        """The training class the head scores highest for each image (evaluation mode, no
        augmentation): what held-out validation compares with the images' classes."""
        inputs = images_to_tensor(
            images, self.device, self.normalization, self.config.image_size, self.memory_format
        )
        self.eval()
        with torch.no_grad(), self.precision.autocast():
            best = self.network()(inputs).argmax(dim=1)
        return self.class_id_table.to(best.device)[best].cpu().numpy()

    def finetune_options(self, transductive: bool) -> FinetuneOptions:
        options = self.options
        return FinetuneOptions(
            epochs=options.finetune_epochs,
            lr=options.finetune_lr,
            transductive=transductive,
            entropy_log_ways=options.entropy_log_ways,
            relu=options.finetune_relu,
            freeze_batch_norm=options.finetune_freeze_bn,
            augment=options.finetune_augment,
            bn_micro_batch=options.finetune_bn_micro_batch,
        )

    def query_logits(self, ep: EpisodeTensors) -> torch.Tensor:
        inference = self.options.inference
        if inference == "md_finetune":
            return md_finetune_query_logits(
                self.backbone, ep, self.options.md_finetune_options(), self.batch_norm
            )
        if inference in ("finetune", "transductive"):
            options = self.finetune_options(transductive=inference == "transductive")
            return finetune_query_logits(self.network(), ep, options, self.normalization)
        if inference == "support_init":
            network = self.network()
            head = CosineHead.from_support(
                network(ep.support_images), ep.support_labels, ep.ways, self.options.finetune_relu
            )
            return head(network(ep.query_images))
        support, query = self.embed_episode(ep)
        if inference == "knn":
            return knn_logits(
                query,
                support,
                ep.support_labels,
                ep.ways,
                self.options.knn_k,
                self.options.knn_metric,
            )
        return prototype_logits(query, class_prototypes(support, ep.support_labels, ep.ways))
