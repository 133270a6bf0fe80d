"""Fine-tuning a pre-trained network on an episode (Dhillon et al., sec. 3 and appendix A.3).

A cosine classifier is appended to the backbone's logits and initialised from the support set
(eq. 6); then all weights are fine-tuned with Adam (lr 5e-5, 25 epochs) on the support
cross-entropy. Transductive fine-tuning adds the Shannon entropy of query predictions (eq. 8),
one update per term per epoch; the entropy term can be divided by log(ways) (sec. 4.2).

As in the authors' code, the classifier is initialised in evaluation mode on plain images; each
update then sees an augmented batch (A.4: the support for the cross-entropy, the query for the
entropy) with BatchNorm in training mode, normalising by that batch's statistics and updating
the running ones, which the final query prediction (evaluation mode, plain images) uses. Other
layers (DropBlock) stay in evaluation mode: the paper fine-tunes without regularisation.
`freeze_batch_norm` keeps the pre-training statistics throughout, `augment=False` drops A.4;
either way the network is a copy and the pre-trained one is left unchanged.

BatchNorm micro-batches: the authors' `micro_forward` (utils.py) runs a fine-tuning batch in
chunks of 75 images (`torch.split(x, 75)`), each forward pass normalising by its own chunk's
statistics and updating the running ones once per chunk, with the loss the chunk-size weighted
sum of chunk means (= the mean over the batch). Its batch comes from a shuffling data loader, so
the chunks are a random partition. `bn_micro_batch` (default 75) does the same, the order drawn
from the episode's generator; it changes nothing for sets of at most 75 images (5-way 1- and
5-shot supports, 5 x 15 queries), and 0 normalises the whole set as one batch (the earlier
behaviour).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from learners.feed.episode_batch import EpisodeTensors, Normalization
from learners.inference.finetune_augment import active_generator, augment_images
from learners.nn.batched_batch_norm import MaskedBatchNorm2d
from learners.nn.prototypes import cosine_classifier_logits, support_based_init

__all__ = [
    "batch_norm_training",
    "CosineHead",
    "DHILLON_BN_MICRO_BATCH",
    "finetune_network",
    "finetune_query_logits",
    "FinetuneOptions",
    "mean_entropy",
    "micro_batched_logits",
    "micro_batches",
]

DHILLON_BN_MICRO_BATCH = 75  # few-shot-baseline utils.py micro_forward: torch.split(x, 75)


@dataclass(frozen=True)
class FinetuneOptions:
    epochs: int = 25
    lr: float = 5e-5
    transductive: bool = False
    entropy_log_ways: bool = False
    relu: bool = True
    freeze_batch_norm: bool = False  # deviation: keep pre-training BatchNorm statistics
    augment: bool = True  # A.4 augmentation of every fine-tuning batch
    bn_micro_batch: int = DHILLON_BN_MICRO_BATCH  # BatchNorm chunk size in training mode; 0: all

    def micro_batched(self, count: int) -> bool:
        """Whether a fine-tuning batch of `count` images runs in BatchNorm micro-batches."""
        return not self.freeze_batch_norm and 0 < self.bn_micro_batch < count


def micro_batches(count: int, size: int, generator: torch.Generator | None) -> list[torch.Tensor]:
    """The authors' micro-batches of a shuffled batch: a random order of range(count) (from
    `generator`) cut into consecutive chunks of `size` (the last one shorter)."""
    return list(torch.split(torch.randperm(count, generator=generator), size))


def micro_batched_logits(
    forward: Callable[[torch.Tensor], torch.Tensor],
    images: torch.Tensor,
    chunks: list[torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """`forward` (images -> logits) run once per chunk, so BatchNorm in training mode uses each
    chunk's statistics and updates its running ones per chunk; returns the logits in chunk
    order and that order (index into `images`). The mean of a loss over these rows is the
    authors' sum over chunks of (chunk size / batch size) x the chunk's mean loss."""
    order = torch.cat(chunks).to(images.device)
    outputs = [forward(images[chunk.to(images.device)]) for chunk in chunks]
    return torch.cat(outputs), order


class CosineHead(nn.Module):
    """Classifier on backbone logits: w z_+ / ||z_+|| + b (eq. 7), initialised by eq. 6."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, relu: bool = True):
        super().__init__()
        self.weight = nn.Parameter(weight.detach().clone())
        self.bias = nn.Parameter(bias.detach().clone())
        self.relu = relu

    @classmethod
    def from_support(
        cls, support_logits: torch.Tensor, labels: torch.Tensor, ways: int, relu: bool = True
    ) -> CosineHead:
        weight, bias = support_based_init(support_logits, labels, ways, relu)
        return cls(weight, bias, relu)

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return cosine_classifier_logits(logits, self.weight, self.bias, self.relu)


def mean_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Average Shannon entropy H(p) of the softmax rows (the regulariser of eq. 8)."""
    log_p = F.log_softmax(logits, dim=1)
    return -(log_p.exp() * log_p).sum(dim=1).mean()


def batch_norm_training(model: nn.Module) -> None:
    """Evaluation mode everywhere except BatchNorm layers, which use batch statistics."""
    model.eval()
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm | MaskedBatchNorm2d):
            module.train()


def finetune_network(
    network: nn.Module,
    ep: EpisodeTensors,
    options: FinetuneOptions,
    normalization: Normalization = Normalization(),
    generator: torch.Generator | None = None,
) -> tuple[nn.Module, CosineHead]:
    """Fine-tune a copy of `network` (images -> logits over training classes) on `ep`; returns
    the fine-tuned copy (in evaluation mode) and its cosine head. `network` is left unchanged.
    `generator` draws the augmentation (default: `augmentation_generator`'s, else global)."""
    model = copy.deepcopy(network).eval()
    generator = active_generator(generator)

    def batch(images: torch.Tensor) -> torch.Tensor:
        if not options.augment:
            return images
        return augment_images(images, normalization, generator)

    def fit_logits(images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits of a fine-tuning batch (BatchNorm micro-batches as the authors' code) and
        the order of its rows (None: the batch's own)."""
        images = batch(images)
        if not options.micro_batched(len(images)):
            return head(model(images)), None
        chunks = micro_batches(len(images), options.bn_micro_batch, generator)
        return micro_batched_logits(lambda x: head(model(x)), images, chunks)

    with torch.enable_grad():
        with torch.no_grad():
            head = CosineHead.from_support(
                model(ep.support_images), ep.support_labels, ep.ways, options.relu
            )
        optimizer = torch.optim.Adam(
            list(model.parameters()) + list(head.parameters()), lr=options.lr
        )
        entropy_weight = 1.0
        if options.entropy_log_ways and ep.ways > 1:
            entropy_weight = 1.0 / math.log(ep.ways)
        if not options.freeze_batch_norm:
            batch_norm_training(model)
        for _ in range(options.epochs):
            optimizer.zero_grad(set_to_none=True)
            logits, order = fit_logits(ep.support_images)
            labels = ep.support_labels if order is None else ep.support_labels[order]
            F.cross_entropy(logits, labels).backward()
            optimizer.step()
            if options.transductive:
                optimizer.zero_grad(set_to_none=True)
                (entropy_weight * mean_entropy(fit_logits(ep.query_images)[0])).backward()
                optimizer.step()
    return model.eval(), head


def finetune_query_logits(
    network: nn.Module,
    ep: EpisodeTensors,
    options: FinetuneOptions,
    normalization: Normalization = Normalization(),
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The (Q, ways) query logits of `network` fine-tuned on `ep` (see `finetune_network`)."""
    model, head = finetune_network(network, ep, options, normalization, generator)
    with torch.no_grad():
        return head(model(ep.query_images))
