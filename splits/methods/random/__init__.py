"""`--method random`: seeded random class splits by fractions (`algorithm`, `method`)."""

from __future__ import annotations

from episodes.util.lazy_names import lazy_names

__all__ = ["RandomMethod", "RandomParameters", "random_split"]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "RandomMethod": "splits.methods.random.method",
        "RandomParameters": "splits.methods.random.method",
        "random_split": "splits.methods.random.algorithm",
    },
)
