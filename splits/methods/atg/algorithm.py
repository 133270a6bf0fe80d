"""Automatic Taskset Generation (ATG; Arnold & Sha, §4 and App. A.6).

Class embeddings are unit-normalised; two learnable centroids mu_train, mu_test each define a
multinomial over the M classes, p(y_i) = softmax_i(-||phi_i - mu||^2) (§4, see
`splits.methods.atg.divergences`).  ATG minimises the penalised clustering objective (§4, eq. for J)

    J = -reduce_i log 1/2 (p_train(y_i) + p_test(y_i)) + lambda (D(p_train || p_test) - R)^2

with SGD (lr 0.1, momentum 0.9, 7,000 iterations, lambda = 1; App. A.6), then ranks classes by
log p_train - log p_test: the top classes go to train and the rest alternate test, valid, test,
... starting with the most test-like class (§4, "Train, Validation, and Test Assignments").
Ties are broken at random from the seed, so R = 0 gives a random split (footnote 2).

`reduce` is the mean over classes by default.  The paper prints a sum (and the authors' example
code sums); the mean is the sum divided by M, so it is the paper's objective with an effective
penalty weight lambda_eff = M * lambda (and a learning rate / M), which split files record as
`lambda_effective`.  With the literal sum at lambda = 1 the likelihood outweighs the penalty
M-fold (the achieved divergence falls far below R) and SGD at lr 0.1 diverges for a few hundred
classes; `nll_reduction="sum"` gives it.

The paper does not say how the centroids start; the authors' example code draws each from
N(0, I) (`init="reference"`).  By default both start at the mean class embedding, pushed apart
by +-init_offset (0.01) along a direction drawn from the seed (`init="centre"`), which reached
a lower J than N(0, I) starts on every embedding set we tried.  Partitions depend strongly on
the start (J is nearly flat across very different partitions), so ATG runs `restarts` starts
(restart 0 from `seed`, restart k from [seed, k]) in one batch and keeps the lowest J among the
starts whose achieved divergence is within `tolerance` (5%) of R; a run where none is, or where
every start diverged, is an `ATGFailure` and nothing is saved.  For R = 0 every start is the
single centre point: the objective is symmetric and its penalty gradient vanishes at
p_train = p_test, so the centroids stay together, every score ties and the split is random.

R must be reachable: the divergence grows without bound as the centroids separate, but SGD at
the paper's step size runs away once R is too large for the embeddings.  `reachable_check` runs
the first PILOT_STEPS steps of every start before the long work and refuses an R that none of
them gets within tolerance of, naming the largest R that one does (bisection over such pilots,
an estimate: the check after the full run is the one that decides what is saved).

Its settings are `splits.methods.atg.config.ATGConfig` (one R per run: `ATGConfig.runs`);
`python -m splits make --method atg` writes ATG split files (`splits.methods.atg.method`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from episodes.records.split_file import SplitFile
from episodes.records.split_sizes import split_counts
from episodes.util.cli_errors import UserError
from episodes.util.progress_lines import ProgressLines
from splits.embeddings.embeddings_file import EmbeddingsFile
from splits.methods.atg.config import ATGConfig
from splits.methods.atg.divergences import atg_divergence, class_log_probs

__all__ = [
    "ATGFailure",
    "ATGFit",
    "ATGResult",
    "DTYPES",
    "PILOT_STEPS",
    "REACH_BISECTIONS",
    "RUNAWAY_FACTOR",
    "TIE_DECIMALS",
    "assign_splits",
    "atg_objective",
    "atg_split_file",
    "default_file_name",
    "descend",
    "fit_centroids",
    "initial_centroids",
    "normalise_rows",
    "reachable_check",
    "run_atg",
]

DTYPES = {"float32": torch.float32, "float64": torch.float64}  # ATGConfig.dtype's names
TIE_DECIMALS = 9  # scores equal to 1e-9 count as ties
PILOT_STEPS = 1000  # runaways mostly start within the first few hundred steps
RUNAWAY_FACTOR = 1e3  # D above this many times max(R, 1): the start has run away
REACH_BISECTIONS = 7


class ATGFailure(UserError, ValueError):
    """ATG could not produce a split for this R (unreachable, diverged or missed R)."""


@dataclass
class ATGFit:
    """Every start of one ATG run (arrays over restarts) and the start kept."""

    centroids: np.ndarray  # (K, 2, D)
    scores: np.ndarray  # (K, N): log p_train - log p_test
    divergences: np.ndarray  # (K,)
    objectives: np.ndarray  # (K,)
    diverged: np.ndarray  # (K,) bool: non-finite or ran away at some step
    tie_break: np.ndarray  # (N,) permutation from the seed
    chosen: int | None  # best objective among the starts that reached R; None if none did

    def status(self, config: ATGConfig) -> list[str]:
        """Per start: 'diverged', 'missed' (D not within tolerance of R) or 'ok'."""
        return [
            "diverged" if bad else "ok" if config.reaches(float(d)) else "missed"
            for bad, d in zip(self.diverged.tolist(), self.divergences.tolist())
        ]


@dataclass
class ATGResult:
    """Centroids, scores and the class partition (indices into the embedding rows), with
    what the other restarts found."""

    centroids: np.ndarray  # (2, D): mu_train, mu_test in the unit-normalised space
    scores: np.ndarray  # (N,): log p_train - log p_test
    achieved_divergence: float
    final_objective: float
    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray
    restarts: dict[str, object]


def normalise_rows(embeddings: np.ndarray) -> np.ndarray:
    """Unit-normalise each class embedding (App. A.6); zero rows are rejected."""
    emb = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    zero = np.flatnonzero(norms[:, 0] == 0)
    if zero.size:
        raise ATGFailure(f"{zero.size} class embeddings are all zeros (rows {zero[:5].tolist()})")
    return emb / norms


def atg_objective(
    embeddings: torch.Tensor,
    centroids: torch.Tensor,
    config: ATGConfig,
    sq_norms: torch.Tensor | None = None,
    embeddings_t: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(J, D, log-probs) for unit-norm `embeddings` (N, D) and `centroids` (2, D) (§4, eq. J);
    centroids (K, 2, D) evaluate K starts at once (J, D of shape (K,), log-probs (K, 2, N))."""
    flat = centroids.reshape(-1, centroids.shape[-1])
    log_probs = class_log_probs(embeddings, flat, sq_norms, embeddings_t)
    log_probs = log_probs.reshape(*centroids.shape[:-1], -1)
    log_mix = torch.logsumexp(log_probs, dim=-2) - math.log(2.0)
    nll = -(log_mix.mean(dim=-1) if config.nll_reduction == "mean" else log_mix.sum(dim=-1))
    div = atg_divergence(config.divergence, embeddings, centroids, log_probs, config.damping)
    return nll + config.lam * (div - config.target_divergence) ** 2, div, log_probs


def initial_centroids(
    unit_embeddings: np.ndarray, config: ATGConfig
) -> tuple[np.ndarray, np.random.Generator]:
    """(K, 2, D) starts, one per restart, and the seed's generator after restart 0's draw
    (which then breaks score ties).  R = 0: both centroids of a start coincide."""
    d = unit_embeddings.shape[1]
    centre = unit_embeddings.mean(axis=0)
    starts = np.empty((config.restarts, 2, d))
    first = np.random.default_rng(config.seed)
    for k in range(config.restarts):
        rng = first if k == 0 else np.random.default_rng([config.seed, k])
        if config.init == "reference":
            starts[k] = rng.standard_normal((2, d))
        else:
            direction = rng.standard_normal(d)
            direction *= config.init_offset / np.linalg.norm(direction)
            starts[k] = np.stack([centre + direction, centre - direction])
        if config.target_divergence == 0:
            starts[k] = centre if config.init == "centre" else starts[k, 0]
    return starts, first


def descend(
    unit_embeddings: np.ndarray,
    starts: np.ndarray,
    config: ATGConfig,
    steps: int,
    progress: bool = False,
) -> tuple[torch.Tensor, np.ndarray]:
    """SGD with momentum on J from every start at once (their gradients are independent).
    Returns the float64 centroids (K, 2, D) and which starts ran away (non-finite J, or D above
    RUNAWAY_FACTOR * max(R, 1)) at some step; stops early once every start has."""
    limit = RUNAWAY_FACTOR * max(config.target_divergence, 1.0)
    previous = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        emb = torch.from_numpy(np.ascontiguousarray(unit_embeddings, dtype=np.float64))
        work = emb.to(DTYPES[config.dtype])
        sq_norms = (work * work).sum(dim=1)
        work_t = work.T.contiguous()
        initial = torch.from_numpy(starts).to(work.dtype)
        centroids = initial.clone().requires_grad_(True)
        optimiser = torch.optim.SGD([centroids], lr=config.lr, momentum=config.momentum)
        diverged = np.zeros(len(starts), dtype=bool)
        lines = ProgressLines(
            f"ATG R={config.target_divergence:g}", steps, "steps", enabled=progress
        )
        for _ in range(steps):
            optimiser.zero_grad(set_to_none=True)
            objective, div, _ = atg_objective(work, centroids, config, sq_norms, work_t)
            objective.sum().backward()
            optimiser.step()
            j, d = objective.detach().numpy(), div.detach().numpy()
            diverged |= ~np.isfinite(j) | ~(d <= limit)
            if diverged.all():
                break
            if diverged.any():  # park a start that ran away where it began, finite
                with torch.no_grad():
                    dead = torch.from_numpy(diverged)
                    centroids[dead] = initial[dead]
                    velocity = optimiser.state[centroids].get("momentum_buffer")
                    if velocity is not None:
                        velocity[dead] = 0.0
            if progress:
                lines.advance(1, f"best J={np.min(j[~diverged]):.5f}")
        return centroids.detach().to(torch.float64), diverged
    finally:
        torch.set_num_threads(previous)


def fit_centroids(unit_embeddings: np.ndarray, config: ATGConfig, progress: bool = False) -> ATGFit:
    """Minimise J from every start (`initial_centroids`) and pick the start kept: the lowest
    final J among those whose achieved divergence is within tolerance of R."""
    config.validate()
    n = unit_embeddings.shape[0]
    if n < 2:
        raise ATGFailure(f"ATG needs at least 2 classes, got {n}")
    starts, rng = initial_centroids(unit_embeddings, config)
    final, diverged = descend(unit_embeddings, starts, config, config.iterations, progress)
    if config.target_divergence == 0:
        # Equal by symmetry (same start, same gradients); average away any float rounding.
        final[:] = final.mean(dim=1, keepdim=True)
    emb = torch.from_numpy(np.ascontiguousarray(unit_embeddings, dtype=np.float64))
    with torch.no_grad():
        objective, div, log_probs = atg_objective(emb, final, config)
    objectives, divergences = objective.numpy().copy(), div.numpy().copy()
    diverged |= ~np.isfinite(objectives) | ~np.isfinite(final.numpy()).all(axis=(1, 2))
    scores = (log_probs[:, 0] - log_probs[:, 1]).numpy().copy()
    scores[torch.all(final[:, 0] == final[:, 1], dim=-1).numpy()] = 0.0  # identical: all tie
    fit = ATGFit(
        final.numpy().copy(), scores, divergences, objectives, diverged, rng.permutation(n), None
    )
    ok = [k for k, state in enumerate(fit.status(config)) if state == "ok"]
    if ok:
        fit.chosen = min(ok, key=lambda k: (objectives[k], k))
    return fit


def reachable_check(unit_embeddings: np.ndarray, config: ATGConfig) -> None:
    """Refuse, before the long work, an R that no start reaches: a pilot of the first
    PILOT_STEPS steps where every start runs away or ends outside tolerance of R.  The message
    names the largest R some start of such a pilot does reach (bisection, so "about")."""
    config.validate()
    if config.target_divergence == 0 or config.iterations == 0:
        return
    steps = min(config.iterations, PILOT_STEPS)
    unit = torch.from_numpy(np.ascontiguousarray(unit_embeddings, dtype=np.float64))

    def reached(r: float) -> bool:
        pilot = config.with_target(r)
        starts, _ = initial_centroids(unit_embeddings, pilot)
        final, diverged = descend(unit_embeddings, starts, pilot, steps)
        with torch.no_grad():
            div = atg_objective(unit, final, pilot)[1].numpy()
        return any(not bad and pilot.reaches(float(d)) for bad, d in zip(diverged, div))

    r = float(config.target_divergence)
    if reached(r):
        return
    low, high = 0.0, r
    for _ in range(REACH_BISECTIONS):
        middle = math.sqrt(low * high) if low > 0 else high / 8
        low, high = (middle, high) if reached(middle) else (low, middle)
    reachable = f"about [0, {low:.3g}]" if low > 0 else f"below {high:.3g}"
    raise ATGFailure(
        f"R={r:g} is outside the reachable range of these embeddings: no start of SGD (lr "
        f"{config.lr:g}, momentum {config.momentum:g}, lambda {config.lam:g}, "
        f"{config.restarts} starts) gets within {config.tolerance:.0%} of it in {steps} steps "
        f"(they run away or stop short); R {reachable} is reached here; pass such an R or a "
        f"smaller --lr"
    )


def assign_splits(
    scores: np.ndarray, counts: Sequence[int], tie_break: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Partition classes by score log p_train - log p_test (§4).

    The n_train highest-scoring classes go to train (most train-like first).  The rest, from the
    most test-like up, alternate test, valid, test, ...; once one of the two is full the
    remainder goes to the other.  `tie_break` (a permutation) orders classes with equal scores.
    """
    n_train, n_valid, n_test = (int(c) for c in counts)
    scores = np.asarray(scores, dtype=np.float64)
    if n_train + n_valid + n_test != scores.size:
        raise ValueError(f"split sizes {list(counts)} do not add up to {scores.size} classes")
    rounded = np.round(scores, TIE_DECIMALS)
    order = np.lexsort((np.asarray(tie_break), -rounded))  # descending score, then tie_break
    train = order[:n_train]
    rest = order[n_train:][::-1]  # most test-like first
    test: list[int] = []
    valid: list[int] = []
    for k, cls in enumerate(rest):
        wants_test = k % 2 == 0
        if (wants_test and len(test) < n_test) or len(valid) >= n_valid:
            test.append(int(cls))
        else:
            valid.append(int(cls))
    return train, np.array(valid, dtype=np.int64), np.array(test, dtype=np.int64)


def _failure(fit: ATGFit, config: ATGConfig) -> ATGFailure:
    r = config.target_divergence
    states = fit.status(config)
    if all(state == "diverged" for state in states):
        return ATGFailure(
            f"R={r:g}: all {len(states)} starts diverged (non-finite or runaway objective); "
            f"nothing saved; pass a smaller R or a smaller --lr"
        )
    finite = [k for k, state in enumerate(states) if state == "missed"]
    closest = min(finite, key=lambda k: abs(fit.divergences[k] - r))
    return ATGFailure(
        f"R={r:g}: no start reached R within {config.tolerance:.0%} (closest achieved "
        f"{fit.divergences[closest]:.4g}; {states.count('diverged')} of {len(states)} diverged); "
        f"nothing saved; raise --iterations or --lambda, or pass more --restarts"
    )


def _agreement(partitions: list[np.ndarray | None], chosen: np.ndarray) -> list[float | None]:
    """Per restart, the share of classes put in the same split as in the chosen partition
    (None for a start that diverged)."""
    return [None if p is None else float(np.mean(p == chosen)) for p in partitions]


def run_atg(unit_embeddings: np.ndarray, config: ATGConfig, progress: bool = False) -> ATGResult:
    """Fit the centroids from every start, keep the best, assign every class (indices refer to
    rows of the embeddings).  Raises ATGFailure when no start reached R."""
    config.validate()
    counts = split_counts(unit_embeddings.shape[0], config.fractions)
    fit = fit_centroids(unit_embeddings, config, progress)
    if fit.chosen is None:
        raise _failure(fit, config)
    partitions: list[np.ndarray | None] = []
    for k in range(config.restarts):
        if fit.diverged[k]:
            partitions.append(None)
            continue
        label = np.empty(unit_embeddings.shape[0], dtype=np.int64)
        for value, members in enumerate(assign_splits(fit.scores[k], counts, fit.tie_break)):
            label[members] = value
        partitions.append(label)
    k = fit.chosen
    train, valid, test = assign_splits(fit.scores[k], counts, fit.tie_break)
    ok = [j for j, state in enumerate(fit.status(config)) if state == "ok"]
    restarts = {
        "count": config.restarts,
        "init": config.init,
        "chosen": k,
        "status": fit.status(config),
        "objectives": [float(x) for x in fit.objectives],
        "divergences": [float(x) for x in fit.divergences],
        "objective_spread": float(np.ptp(fit.objectives[ok])),
        "same_split_share": _agreement(partitions, partitions[k]),
    }
    return ATGResult(
        fit.centroids[k],
        fit.scores[k],
        float(fit.divergences[k]),
        float(fit.objectives[k]),
        train,
        valid,
        test,
        restarts,
    )


def atg_split_file(
    embeddings: EmbeddingsFile,
    config: ATGConfig,
    dataset: str,
    progress: bool = False,
) -> SplitFile:
    """Run ATG on an embeddings file and describe the result as a split file."""
    config.validate()
    split_counts(embeddings.num_classes, config.fractions)
    result = run_atg(normalise_rows(embeddings.embeddings), config, progress)
    names = embeddings.class_names
    parameters = {
        "R": float(config.target_divergence),
        "lambda": float(config.lam),
        "lambda_effective": float(config.lambda_effective(embeddings.num_classes)),
        "likelihood": (
            f"mean over the M={embeddings.num_classes} classes (the paper's sum with "
            f"lambda_effective = M * lambda)"
            if config.nll_reduction == "mean"
            else "sum over classes (the paper's formula)"
        ),
        "divergence": config.divergence,
        "iterations": int(config.iterations),
        "seed": int(config.seed),
        "lr": float(config.lr),
        "momentum": float(config.momentum),
        "fractions": [float(f) for f in config.fractions],
        "nll_reduction": config.nll_reduction,
        "dtype": config.dtype,
        "tolerance": float(config.tolerance),
        "restarts": result.restarts,
        "embedding_source": {
            "file": Path(embeddings.origin).name,
            "model": embeddings.model,
            "weights_hash": embeddings.weights_hash,
            "num_classes": embeddings.num_classes,
            "dim": embeddings.dim,
        },
    }
    if config.divergence == "wasserstein2":
        parameters["damping"] = float(config.damping)
    return SplitFile(
        dataset=dataset,
        method="atg",
        train=[names[i] for i in result.train],
        valid=[names[i] for i in result.valid],
        test=[names[i] for i in result.test],
        parameters=parameters,
        achieved_divergence=result.achieved_divergence,
        final_objective=result.final_objective,
        embedding_hash=embeddings.content_hash(),
        centroids={"train": result.centroids[0].tolist(), "test": result.centroids[1].tolist()},
    )


def default_file_name(config: ATGConfig) -> str:
    """File name for one R: atg_<divergence>_R<R>_seed<seed>.json."""
    return f"atg_{config.divergence}_R{config.target_divergence:g}_seed{config.seed}.json"
