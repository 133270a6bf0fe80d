"""Divergences between the train and test class distributions (ATG paper §4, §5.2, App. A.2).

ATG models each side as a multinomial over the M classes whose probability falls with the
squared distance of the class embedding to the side's centroid (§4):
    p(y = y_i) = softmax_i(-||phi_i - mu||^2).
The paper prints the softmax argument without the minus sign; with unit-norm embeddings the two
forms are the same family up to mu -> -mu, and the minus sign is the one that makes mu the
centroid ("density ... depends on its distance to the centroid", soft K-means), so it is used.
No temperature is stated, so none is applied.

Table 2 compares D = KL, symmetrised KL, Wasserstein-2 and the Euclidean distance between
centroids; for Gaussians the moments are estimated from class embeddings with a diagonal
damping of 0.001 (App. A.2).  All functions here are pure torch and differentiable.
"""

from __future__ import annotations

import torch

__all__ = [
    "DEFAULT_DAMPING",
    "DIVERGENCES",
    "atg_divergence",
    "class_log_probs",
    "euclidean",
    "gaussian_divergence",
    "gaussian_kl",
    "gaussian_wasserstein2",
    "kl_divergence",
    "symmetric_kl",
    "weighted_gaussian",
]

DIVERGENCES = ("symmetric_kl", "kl", "euclidean", "wasserstein2")
DEFAULT_DAMPING = 1e-3


class _ClassDot(torch.autograd.Function):
    """centroids @ embeddings.T with both products in their fast memory layout.

    Forward reads the (N, D) matrix, backward a (D, N) copy: on CPU this is about twice as
    fast as autograd through `centroids @ embeddings.T` for N >> D (ATG on 21,000 classes).
    """

    @staticmethod
    def forward(ctx, centroids, embeddings, embeddings_t):  # type: ignore[override]
        ctx.save_for_backward(embeddings_t)
        return (embeddings @ centroids.T).T

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        (embeddings_t,) = ctx.saved_tensors
        return grad @ embeddings_t.T, None, None


def class_log_probs(
    embeddings: torch.Tensor,
    centroids: torch.Tensor,
    sq_norms: torch.Tensor | None = None,
    embeddings_t: torch.Tensor | None = None,
) -> torch.Tensor:
    """log p_k(y_i) = log softmax_i(-||phi_i - mu_k||^2) for each centroid k: shape (K, N).

    Optional precomputed `sq_norms` (||phi_i||^2, shape (N,)) and `embeddings_t` (a contiguous
    (D, N) copy of the embeddings) save passes over the data inside an optimisation loop.
    """
    if sq_norms is None:
        sq_norms = (embeddings * embeddings).sum(dim=1)
    mu_norms = (centroids * centroids).sum(dim=1, keepdim=True)  # (K, 1)
    if embeddings_t is None:
        dots = centroids @ embeddings.T
    else:
        dots = _ClassDot.apply(centroids, embeddings, embeddings_t)
    return torch.log_softmax(2.0 * dots - sq_norms[None, :] - mu_norms, dim=1)


def kl_divergence(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """KL(p || q) = sum_i p_i (log p_i - log q_i) for multinomials given as log-probabilities."""
    return (log_p.exp() * (log_p - log_q)).sum(dim=-1)


def symmetric_kl(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """Symmetrised KL (Jeffreys divergence): KL(p || q) + KL(q || p)."""
    return ((log_p.exp() - log_q.exp()) * (log_p - log_q)).sum(dim=-1)


def euclidean(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """||a - b||_2, with a finite (zero) gradient when a == b."""
    return torch.sqrt(torch.clamp(((a - b) ** 2).sum(dim=-1), min=1e-30))


def weighted_gaussian(
    embeddings: torch.Tensor, log_w: torch.Tensor | None = None, damping: float = DEFAULT_DAMPING
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and covariance (+ damping * I) of the rows of `embeddings`, optionally weighted.

    Unweighted means the maximum-likelihood fit to the class embeddings (App. A.2); with
    `log_w` (a log-probability vector over the rows) the moments are those of that multinomial.
    """
    n, d = embeddings.shape
    if log_w is None:
        w = torch.full((n,), 1.0 / n, dtype=embeddings.dtype, device=embeddings.device)
    else:
        w = log_w.exp()
    mean = w @ embeddings
    centred = embeddings - mean
    cov = (centred * w[:, None]).T @ centred
    eye = torch.eye(d, dtype=embeddings.dtype, device=embeddings.device)
    return mean, cov + damping * eye


def gaussian_wasserstein2(
    m1: torch.Tensor, c1: torch.Tensor, m2: torch.Tensor, c2: torch.Tensor
) -> torch.Tensor:
    """W2 between N(m1, c1) and N(m2, c2):
    W2^2 = ||m1 - m2||^2 + tr(c1) + tr(c2) - 2 tr((c1^1/2 c2 c1^1/2)^1/2).

    The trace term is the sum of square roots of the eigenvalues of L^T c2 L with c1 = L L^T
    (same spectrum as c1 c2), which needs one Cholesky and one symmetric eigensolve.
    """
    chol = torch.linalg.cholesky(c1)
    inner = chol.T @ c2 @ chol
    inner = 0.5 * (inner + inner.T)
    eig = torch.clamp(torch.linalg.eigvalsh(inner), min=0.0)
    w2_sq = ((m1 - m2) ** 2).sum() + torch.trace(c1) + torch.trace(c2) - 2.0 * eig.sqrt().sum()
    return torch.sqrt(torch.clamp(w2_sq, min=1e-30))


def gaussian_kl(
    m0: torch.Tensor, c0: torch.Tensor, m1: torch.Tensor, c1: torch.Tensor
) -> torch.Tensor:
    """KL(N(m0, c0) || N(m1, c1)) = 1/2 [tr(c1^-1 c0) + dm^T c1^-1 dm - d + ln|c1| - ln|c0|]."""
    d = m0.shape[0]
    l1 = torch.linalg.cholesky(c1)
    l0 = torch.linalg.cholesky(c0)
    a = torch.linalg.solve_triangular(l1, l0, upper=False)  # l1^-1 l0
    dm = torch.linalg.solve_triangular(l1, (m1 - m0)[:, None], upper=False)
    logdet1 = 2.0 * torch.log(torch.diagonal(l1)).sum()
    logdet0 = 2.0 * torch.log(torch.diagonal(l0)).sum()
    return 0.5 * ((a * a).sum() + (dm * dm).sum() - d + logdet1 - logdet0)


def gaussian_divergence(
    name: str, m0: torch.Tensor, c0: torch.Tensor, m1: torch.Tensor, c1: torch.Tensor
) -> torch.Tensor:
    """One of DIVERGENCES between two Gaussians (Euclidean: distance between the means)."""
    if name == "kl":
        return gaussian_kl(m0, c0, m1, c1)
    if name == "symmetric_kl":
        return gaussian_kl(m0, c0, m1, c1) + gaussian_kl(m1, c1, m0, c0)
    if name == "wasserstein2":
        return gaussian_wasserstein2(m0, c0, m1, c1)
    if name == "euclidean":
        return euclidean(m0, m1)
    raise ValueError(f"unknown divergence {name!r}; expected one of {DIVERGENCES}")


def atg_divergence(
    name: str,
    embeddings: torch.Tensor,
    centroids: torch.Tensor,
    log_probs: torch.Tensor,
    damping: float = DEFAULT_DAMPING,
) -> torch.Tensor:
    """D(p_train || p_test) for ATG's two centroid multinomials (row 0 train, row 1 test).

    kl / symmetric_kl act on the multinomials; euclidean is ||mu_train - mu_test||;
    wasserstein2 fits a Gaussian to each side (moments of the class embeddings under p_train and
    p_test, + damping * I) and takes W2 between them.  `centroids` (..., 2, D) and `log_probs`
    (..., 2, N) may carry leading dimensions (several ATG starts at once); D then has them.
    """
    train, test = log_probs[..., 0, :], log_probs[..., 1, :]
    if name == "symmetric_kl":
        return symmetric_kl(train, test)
    if name == "kl":
        return kl_divergence(train, test)
    if name == "euclidean":
        return euclidean(centroids[..., 0, :], centroids[..., 1, :])
    if name == "wasserstein2":
        if log_probs.dim() > 2:
            flat = log_probs.reshape(-1, 2, log_probs.shape[-1])
            each = [atg_divergence(name, embeddings, centroids, lp, damping) for lp in flat]
            return torch.stack(each).reshape(log_probs.shape[:-2])
        m0, c0 = weighted_gaussian(embeddings, train, damping)
        m1, c1 = weighted_gaussian(embeddings, test, damping)
        return gaussian_wasserstein2(m0, c0, m1, c1)
    raise ValueError(f"unknown divergence {name!r}; expected one of {DIVERGENCES}")
