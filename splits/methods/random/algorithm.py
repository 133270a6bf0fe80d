"""Seeded random class splits (the ATG paper's 'Random' tasksets, equivalent to R = 0).

`python -m splits make --method random --dataset DIR --fractions 0.7 0.15 0.15 --seed 0
--output FILE` (`splits.methods.random.method`). The one fraction rule of
`episodes.records.split_sizes` (valid and test get floor(f * N) classes,
train the rest, no asked-for split empty), shared with `convert --split-fractions`: the same
class names, fractions and seed give the same split.
"""

from __future__ import annotations

from collections.abc import Sequence

from episodes.records.split_file import SplitFile
from episodes.records.split_sizes import DEFAULT_FRACTIONS, split_by_fractions

__all__ = ["random_split"]


def random_split(
    class_names: Sequence[str],
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    seed: int = 0,
    dataset: str = "dataset",
) -> SplitFile:
    """Shuffle the classes with `seed` and cut them into train / valid / test by `fractions`
    (`split_sizes.split_by_fractions`)."""
    train, valid, test = split_by_fractions(class_names, fractions, seed)
    return SplitFile(
        dataset=dataset,
        method="random",
        train=train,
        valid=valid,
        test=test,
        parameters={"seed": int(seed), "fractions": [float(f) for f in fractions]},
    )
