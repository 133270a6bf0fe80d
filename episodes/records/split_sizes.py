"""Split sizes from fractions, the one rule for every fraction split of this toolkit.

Valid and test get floor(f * N) classes, train the rest: the ATG paper's rule (§4: top 60% to
train, the remaining 40% shared by valid and test), which gives the published counts 96/31/31
of LFW10's 158 classes and 38/12/12 of EMNIST's 62. A split asked for (fraction > 0) is never
left empty: it takes one class from the largest split; fewer classes than non-empty splits
asked for is refused. `convert --split-fractions` and `splits make --method random --fractions`
both cut with `split_by_fractions`, so the same names, fractions and seed give the same split.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from episodes.util.config_flags import ConfigError

__all__ = [
    "DEFAULT_FRACTIONS",
    "SPLIT_NAMES",
    "split_by_fractions",
    "split_counts",
    "validate_fractions",
]

DEFAULT_FRACTIONS = (0.6, 0.2, 0.2)
SPLIT_NAMES = ("train", "valid", "test")
_SUM_TOLERANCE = 1e-6
_FLOOR_EPSILON = 1e-9


def validate_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    """Return (train, valid, test) fractions, or raise ConfigError (a ValueError) naming what is
    wrong."""
    values = tuple(float(f) for f in fractions)
    if len(values) != 3:
        raise ConfigError(f"fractions must be three numbers (train valid test), got {list(values)}")
    if any(not math.isfinite(f) or f < 0 for f in values):
        raise ConfigError(f"fractions must be finite and >= 0, got {list(values)}")
    if abs(sum(values) - 1.0) > _SUM_TOLERANCE:
        raise ConfigError(f"fractions must sum to 1, got {list(values)} (sum {sum(values):.6g})")
    return values  # type: ignore[return-value]


def split_counts(num_classes: int, fractions: Sequence[float]) -> tuple[int, int, int]:
    """(n_train, n_valid, n_test) for N classes: floor for valid and test, train the rest; every
    split with a positive fraction gets >= 1 class (taken from the largest split)."""
    values = validate_fractions(fractions)
    asked = sum(f > 0 for f in values)
    if num_classes < asked:
        raise ConfigError(
            f"{num_classes} classes are too few for fractions {list(values)}: {asked} splits "
            f"are asked for and each needs at least one class"
        )
    n_valid = math.floor(values[1] * num_classes + _FLOOR_EPSILON)
    n_test = math.floor(values[2] * num_classes + _FLOOR_EPSILON)
    counts = [num_classes - n_valid - n_test, n_valid, n_test]
    for k, fraction in enumerate(values):
        if fraction > 0 and counts[k] == 0:
            donor = max(range(3), key=lambda j: counts[j])
            counts[donor] -= 1
            counts[k] = 1
    return counts[0], counts[1], counts[2]


def split_by_fractions(
    names: Sequence[str], fractions: Sequence[float], seed: int
) -> tuple[list[str], list[str], list[str]]:
    """Seeded (train, valid, test) class lists: the names sorted, permuted by
    numpy.random.default_rng(seed), cut by `split_counts`; each list sorted."""
    order = sorted(str(n) for n in names)
    if len(set(order)) != len(order):
        raise ConfigError("class names must be distinct")
    n_train, n_valid, _ = split_counts(len(order), fractions)
    shuffled = [order[i] for i in np.random.default_rng(seed).permutation(len(order))]
    cuts = (
        shuffled[:n_train],
        shuffled[n_train : n_train + n_valid],
        shuffled[n_train + n_valid :],
    )
    return sorted(cuts[0]), sorted(cuts[1]), sorted(cuts[2])
