"""Evaluation metrics: accuracy with 95% CI, episode hardness, average rank with CI ties,
Kendall tau, regression slopes, and per-class precision. Pure functions on numbers/tensors."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from learners.nn.prototypes import cosine_classifier_logits, support_based_init

__all__ = [
    "AccuracySummary",
    "average_ranks",
    "class_precision",
    "difference_inconclusive",
    "divergence_slope",
    "episode_hardness",
    "grouped_summaries",
    "kendall_tau",
    "rank_with_ties",
    "regression_line",
    "summarize_accuracies",
    "t_95",
    "Z_95",
]

Z_95 = 1.96


def t_95(n: int) -> float:
    """The 95% CI factor for the mean of `n` values whose spread is estimated from them:
    Student's t quantile at 0.975 with n - 1 degrees of freedom (12.71 for 2 values, 4.30 for
    3, 2.78 for 5). Few training seeds need it; 1.96 (Z_95) is its limit for many values and
    what the papers use over hundreds of episodes. 0 for fewer than 2 values (no spread)."""
    if n < 2:
        return 0.0
    from scipy.stats import t  # imported here: the training commands never need scipy

    return float(t.ppf(0.975, n - 1))


@dataclass(frozen=True)
class AccuracySummary:
    """Mean, sample standard deviation (ddof=1) and 95% CI half-width 1.96 std / sqrt(n)."""

    mean: float
    std: float
    ci95: float
    n: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def summarize_accuracies(values: Sequence[float] | np.ndarray) -> AccuracySummary:
    """Summary of per-episode accuracies; std and CI are 0 for a single episode."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"need a non-empty 1-D list of accuracies, got shape {array.shape}")
    std = float(array.std(ddof=1)) if array.size > 1 else 0.0
    return AccuracySummary(float(array.mean()), std, Z_95 * std / math.sqrt(array.size), array.size)


def episode_hardness(
    support_logits: torch.Tensor,
    support_labels: torch.Tensor,
    query_logits: torch.Tensor,
    query_labels: torch.Tensor,
    ways: int,
    relu: bool = False,
    scale: float = 1.0,
) -> float:
    """Hardness Omega (Dhillon et al., eq. 9): mean over queries of log((1 - p(y|x)) / p(y|x)).

    p is the softmax of `scale` times w phi(x), phi the L2-normalised logits of a generic
    feature extractor and w the normalised class means of the support logits (eq. 6), as the
    authors' code computes it: no ReLU (`relu=True` adds eq. 7's (.)_+ before normalising).
    Cosines lie in [-1, 1], so with scale 1 an N-way episode has Omega >= log(N - 1) - 2 (the
    true class at cosine 1, every other at -1).
    """
    weights, bias = support_based_init(support_logits.float(), support_labels, ways, relu)
    logits = scale * cosine_classifier_logits(query_logits.float(), weights, bias, relu)
    true = logits.gather(1, query_labels.view(-1, 1)).squeeze(1)
    others = logits.masked_fill(
        torch.nn.functional.one_hot(query_labels, ways).bool(), float("-inf")
    )
    log_odds = torch.logsumexp(others, dim=1) - true  # log(1 - p) - log(p), computed stably
    return float(log_odds.mean())


def class_precision(predictions: np.ndarray, labels: np.ndarray, ways: int) -> np.ndarray:
    """Per-way precision (correct / predicted as that way); NaN for ways never predicted."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    predicted = np.bincount(predictions, minlength=ways).astype(np.float64)
    correct = np.bincount(predictions[predictions == labels], minlength=ways).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(predicted > 0, correct / predicted, np.nan)


def difference_inconclusive(mean_a: float, ci_a: float, mean_b: float, ci_b: float) -> bool:
    """Two-sided 95% test on the difference of two independent means, each given with its 95%
    CI half-width: inconclusive (a tie) when |a - b| <= sqrt(ci_a^2 + ci_b^2)."""
    return abs(mean_a - mean_b) <= math.hypot(ci_a, ci_b)


def rank_with_ties(results: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """Ranks (1 = best) of methods given {method: (mean, ci95)} on one test source.

    Meta-Dataset appendix A.5 and its reference code: methods in decreasing order of accuracy;
    the best remaining method ties with every other remaining method whose difference from it
    is inconclusive (not only a contiguous run below it: 80 +- 0.5, 78 +- 0.3, 77 +- 5 gives
    1.5, 3, 1.5); a tied group takes the next positions and shares their average.
    """
    remaining = sorted(results, key=lambda m: (-results[m][0], m))
    ranks: dict[str, float] = {}
    taken = 0
    while remaining:
        leader = results[remaining[0]]
        group = [remaining[0]] + [
            m for m in remaining[1:] if difference_inconclusive(*leader, *results[m])
        ]
        shared = taken + (len(group) + 1) / 2.0  # mean of positions taken+1 .. taken+len(group)
        for method in group:
            ranks[method] = shared
        taken += len(group)
        remaining = [m for m in remaining if m not in group]
    return ranks


def average_ranks(
    table: Mapping[str, Mapping[str, tuple[float, float]]],
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """{source: {method: (mean, ci95)}} -> (per-source ranks, average rank per method).

    Every source must report the same methods."""
    sources = list(table)
    if not sources:
        raise ValueError("no test sources to rank")
    methods = set(table[sources[0]])
    for source in sources:
        if set(table[source]) != methods:
            raise ValueError(
                f"source {source!r} has methods {sorted(table[source])}, expected {sorted(methods)}"
            )
    per_source = {source: rank_with_ties(table[source]) for source in sources}
    average = {m: float(np.mean([per_source[s][m] for s in sources])) for m in sorted(methods)}
    return per_source, average


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall rank correlation tau-b of two score lists over the same items (ties handled)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(f"need two equal-length lists of >= 2 scores, got {a.shape}, {b.shape}")
    i, j = np.triu_indices(a.size, k=1)
    da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    concordance = float((da * db).sum())
    pairs_a, pairs_b = float(np.count_nonzero(da)), float(np.count_nonzero(db))
    if pairs_a == 0 or pairs_b == 0:
        return float("nan")  # one ranking is constant: correlation undefined
    return concordance / math.sqrt(pairs_a * pairs_b)


def regression_line(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of y on x."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape or xs.size < 2 or np.ptp(xs) == 0:
        raise ValueError("need >= 2 points with distinct x values for a regression line")
    slope, intercept = np.polyfit(xs, ys, 1)
    return float(slope), float(intercept)


def divergence_slope(divergences: Sequence[float], accuracies: Sequence[float]) -> float:
    """ATG Table 5: slope of the regression of test accuracy on the split divergence R."""
    return regression_line(divergences, accuracies)[0]


def grouped_summaries(
    values: Sequence[float], groups: Sequence[int | float | str]
) -> dict[int | float | str, AccuracySummary]:
    """Accuracy (or precision) summaries per group, e.g. per number of ways or shots."""
    buckets: dict[int | float | str, list[float]] = {}
    for value, group in zip(values, groups):
        if not (isinstance(value, float) and math.isnan(value)):
            buckets.setdefault(group, []).append(float(value))
    return {group: summarize_accuracies(buckets[group]) for group in sorted(buckets)}
