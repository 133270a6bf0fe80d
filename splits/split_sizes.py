"""Split sizes from fractions: valid and test get floor(f * N) classes, train the rest.

This is the ATG paper's rule (§4: top 60% to train, the remaining 40% shared by valid and
test), which gives the published counts 96/31/31 of LFW10's 158 classes and 38/12/12 of
EMNIST's 62.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

DEFAULT_FRACTIONS = (0.6, 0.2, 0.2)
_SUM_TOLERANCE = 1e-6
_FLOOR_EPSILON = 1e-9


def validate_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    """Return (train, valid, test) fractions, or raise ValueError naming what is wrong."""
    values = tuple(float(f) for f in fractions)
    if len(values) != 3:
        raise ValueError(f"fractions must be three numbers (train valid test), got {list(values)}")
    if any(not math.isfinite(f) or f < 0 for f in values):
        raise ValueError(f"fractions must be finite and >= 0, got {list(values)}")
    if abs(sum(values) - 1.0) > _SUM_TOLERANCE:
        raise ValueError(f"fractions must sum to 1, got {list(values)} (sum {sum(values):.6g})")
    return values  # type: ignore[return-value]


def split_counts(num_classes: int, fractions: Sequence[float]) -> tuple[int, int, int]:
    """(n_train, n_valid, n_test) for N classes; every split with a positive fraction gets >= 1."""
    f_train, f_valid, f_test = validate_fractions(fractions)
    n_valid = math.floor(f_valid * num_classes + _FLOOR_EPSILON)
    n_test = math.floor(f_test * num_classes + _FLOOR_EPSILON)
    n_train = num_classes - n_valid - n_test
    for name, frac, count in (("train", f_train, n_train), ("valid", f_valid, n_valid),
                              ("test", f_test, n_test)):
        if frac > 0 and count < 1:
            raise ValueError(
                f"{num_classes} classes are too few for fractions {[f_train, f_valid, f_test]}: "
                f"the {name} split would get {count} classes"
            )
    return n_train, n_valid, n_test
