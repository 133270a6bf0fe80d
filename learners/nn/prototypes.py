"""Class prototypes and the classifiers built from them, shared by every method.

- Euclidean prototype logits -||g(x) - c_k||^2 (Prototypical Networks, Meta-Dataset sec. 2);
- their linear-layer form W_k = 2 c_k, b_k = -||c_k||^2 (Meta-Dataset, Proto-MAML paragraph);
- support-based initialisation of a cosine classifier, w_k = mean_k(z_+) / ||mean_k(z_+)||,
  b = 0 (Dhillon et al., eq. 6) and its logits w . z_+ / ||z_+|| + b (eq. 7).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = [
    "class_prototypes",
    "cosine_classifier_logits",
    "cosine_inputs",
    "cosine_similarity_matrix",
    "l2_normalize",
    "prototype_linear_layer",
    "prototype_logits",
    "squared_euclidean",
    "support_based_init",
    "TF_L2_EPSILON",
    "tf_l2_normalize",
]


def class_prototypes(features: torch.Tensor, labels: torch.Tensor, ways: int) -> torch.Tensor:
    """Mean feature of each way: (S, ...) features, (S,) labels -> (ways, ...) prototypes."""
    flat = features.reshape(features.shape[0], -1)
    one_hot = F.one_hot(labels, ways).to(flat.dtype)  # (S, ways)
    counts = one_hot.sum(dim=0)
    if bool((counts == 0).any()):
        raise ValueError(f"every way needs a support example; counts per way {counts.tolist()}")
    means = one_hot.t() @ flat / counts.unsqueeze(1)
    return means.reshape(ways, *features.shape[1:])


def squared_euclidean(queries: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
    """(Q, D), (K, D) -> (Q, K) squared Euclidean distances."""
    return (queries.unsqueeze(1) - centres.unsqueeze(0)).pow(2).sum(dim=-1)


def prototype_logits(queries: torch.Tensor, prototypes: torch.Tensor) -> torch.Tensor:
    """Prototypical Network logits -||g(x) - c_k||^2 for every query and way."""
    return -squared_euclidean(queries, prototypes)


def prototype_linear_layer(prototypes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The equivalent linear layer: weights 2 c_k and biases -||c_k||^2 (differentiable in c)."""
    return 2.0 * prototypes, -prototypes.pow(2).sum(dim=-1)


def l2_normalize(values: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    return F.normalize(values, p=2, dim=-1, eps=eps)


# tf.nn.l2_normalize(x, epsilon=1e-3), as Meta-Dataset's learners call it.
TF_L2_EPSILON = 1e-3


def tf_l2_normalize(
    values: torch.Tensor, epsilon: float = TF_L2_EPSILON, dim: int = -1
) -> torch.Tensor:
    """x / sqrt(max(||x||^2, epsilon)) along `dim` (TensorFlow's l2_normalize)."""
    squared = values.pow(2).sum(dim=dim, keepdim=True)
    return values * torch.rsqrt(squared.clamp(min=epsilon))


def cosine_similarity_matrix(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """(Q, D), (S, D) -> (Q, S) cosine similarities."""
    return l2_normalize(queries) @ l2_normalize(keys).t()


def cosine_inputs(logits: torch.Tensor, relu: bool = True) -> torch.Tensor:
    """z_+ / ||z_+|| (Dhillon eq. 7); `relu=False` drops the ReLU, as done for ImageNet-21k."""
    return l2_normalize(F.relu(logits) if relu else logits)


def support_based_init(
    support_logits: torch.Tensor, support_labels: torch.Tensor, ways: int, relu: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dhillon eq. 6: w_k = mean_k(z_+) / ||mean_k(z_+)||, b_k = 0 (averaging before normalising)."""
    activations = F.relu(support_logits) if relu else support_logits
    weights = l2_normalize(class_prototypes(activations, support_labels, ways))
    return weights, torch.zeros(ways, dtype=weights.dtype, device=weights.device)


def cosine_classifier_logits(
    logits: torch.Tensor, weights: torch.Tensor, bias: torch.Tensor, relu: bool = True
) -> torch.Tensor:
    """Dhillon eq. 7: w z_+ / ||z_+|| + b."""
    return cosine_inputs(logits, relu) @ weights.t() + bias
