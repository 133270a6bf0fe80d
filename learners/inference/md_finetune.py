"""Meta-Dataset's 'Finetune' baseline inference (BaselineFinetuneLearner, Triantafillou et al.
sec. 4 and appendix): a new output layer on the embeddings, trained on the support set.

Another algorithm than Dhillon et al.'s fine-tuning (`learners.inference.finetune`): the head
is a freshly initialised linear layer over the episode's ways (`learners.nn.linear_classifier`), optionally weight-normalised (Salimans &
Kingma, with the data-dependent initialisation of g and b on the first support batch) and/or a
cosine classifier (embeddings l2-normalised, logits times a multiplier), trained by
`steps` Adam (or SGD) steps of plain cross-entropy on the support set; optionally every
embedding layer is fine-tuned too (on a copy: the trained weights are never changed).
Formulas: `linear_classifier_logits` / `linear_classifier_forward_pass` and
`BaselineFinetuneLearner` in meta_dataset/learners/ (baseline_learners.py, optimization_learners.py).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from learners import LearnerConfigError
from learners.feed.episode_batch import EpisodeTensors
from learners.nn.batch_norm import embed_support_query
from learners.nn.linear_classifier import MDHead

__all__ = ["check_md_finetune_flags", "md_finetune_query_logits", "MDFinetuneOptions"]


@dataclass(frozen=True)
class MDFinetuneOptions:
    """The knobs of BaselineFinetuneLearner (defaults: gin/best/baselinefinetune_imagenet.gin)."""

    steps: int = 100
    lr: float = 0.01
    adam: bool = True
    all_layers: bool = False
    cosine: bool = True
    weight_norm: bool = True
    cosine_multiplier: float = 10.0


def md_finetune_query_logits(
    backbone: nn.Module, ep: EpisodeTensors, options: MDFinetuneOptions, batch_norm: str
) -> torch.Tensor:
    """Train a new head (and with `all_layers` a copy of the backbone) on the support set, then
    return its query logits (the query embedded under the run's BatchNorm convention)."""
    network = copy.deepcopy(backbone) if options.all_layers else backbone
    with torch.enable_grad():
        fixed = None if options.all_layers else backbone(ep.support_images).detach()
        first = fixed if fixed is not None else network(ep.support_images).detach()
        head = MDHead(first.shape[1], ep.ways, options).to(first.device)
        head.data_dependent_init(first)
        params = list(head.parameters())
        if options.all_layers:
            params += list(network.parameters())
        optimizer = (
            torch.optim.Adam(params, lr=options.lr)
            if options.adam
            else torch.optim.SGD(params, lr=options.lr)
        )
        for _ in range(options.steps):
            features = fixed if fixed is not None else network(ep.support_images)
            loss = F.cross_entropy(head(features), ep.support_labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        _, query = embed_support_query(
            network, network, ep.support_images, ep.query_images, batch_norm
        )
        return head(query)


def check_md_finetune_flags(given: Iterable[str], inference: str | None) -> None:
    """Refuse --md-finetune-* options for an evaluation that does not run this inference
    (ValueError naming the flags), so that none is silently ignored."""
    flags = sorted("--" + name.replace("_", "-") for name in given if name.startswith("md_"))
    if flags and inference != "md_finetune":
        raise LearnerConfigError(
            f"{' and '.join(flags)} apply to Meta-Dataset's Finetune (--inference md_finetune), "
            f"not {'inference ' + inference if inference else 'this method'}"
        )
