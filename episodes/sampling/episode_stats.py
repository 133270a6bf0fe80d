"""Summary statistics of a stream of episode descriptions (ways, shots, support/query sizes),
printed by `python -m episodes.read --stats N` to check a sampler configuration at a glance.

The statistics are accumulated as the descriptions stream by (`IntegerSummary`: a count per
distinct value), so memory stays constant whatever N: 100 million episodes need no more than
a thousand. Percentiles are exact, with numpy's default (linear) interpolation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from episodes.sampling.episode import EpisodeDescription

__all__ = ["IntegerSummary", "PERCENTILES", "episode_statistics", "format_statistics", "summarize"]

PERCENTILES = (5, 25, 50, 75, 95)


def summarize(values: Iterable[float]) -> dict[str, float]:
    """mean, min, max and percentiles p5..p95 of a list of numbers (the batch computation)."""
    arr = np.asarray(list(values), dtype=np.float64)
    if arr.size == 0:
        return {"count": 0}
    out = {
        "count": int(arr.size),
        "mean": float(arr.mean()),
        "min": float(arr.min()),
        "max": float(arr.max()),
    }
    for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES)):
        out[f"p{p}"] = float(v)
    return out


class IntegerSummary:
    """`summarize` of a stream of integers in constant memory: one count per distinct value."""

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()

    def add(self, value: int) -> None:
        self.counts[value] += 1

    def update(self, values: Iterable[int]) -> None:
        self.counts.update(values)

    def summary(self) -> dict[str, float]:
        """The same keys and values as `summarize` of every value added."""
        n = sum(self.counts.values())
        if n == 0:
            return {"count": 0}
        values = np.array(sorted(self.counts), dtype=np.float64)
        ends = np.cumsum([self.counts[int(v)] for v in values])  # rank after each value

        def ranked(k: int) -> float:  # the k-th smallest (0-based)
            return float(values[np.searchsorted(ends, k, side="right")])

        total = sum(int(v) * c for v, c in self.counts.items())
        out = {"count": n, "mean": total / n, "min": float(values[0]), "max": float(values[-1])}
        for p in PERCENTILES:
            position = (n - 1) * (p / 100)  # numpy's "linear" method
            below = int(np.floor(position))
            low, high = ranked(below), ranked(min(below + 1, n - 1))
            t = position - below
            out[f"p{p}"] = high - (high - low) * (1 - t) if t >= 0.5 else low + (high - low) * t
        return out


def episode_statistics(descriptions: Iterable[EpisodeDescription]) -> dict[str, Any]:
    """Ways, per-class shots, per-class query, support and query sizes of the episodes, each
    summarised (mean, min, max, percentiles), plus episodes per source and split. Streams:
    no description is kept once counted."""
    ways, shots, query_per_class = IntegerSummary(), IntegerSummary(), IntegerSummary()
    support, query = IntegerSummary(), IntegerSummary()
    sources: Counter[str] = Counter()
    splits: Counter[str] = Counter()
    count = 0
    for d in descriptions:
        count += 1
        ways.add(d.ways)
        shots.update(d.shots)
        query_per_class.update(len(q) for q in d.query)
        support.add(d.support_size)
        query.add(d.query_size)
        sources[d.source] += 1
        splits[d.split.value] += 1
    return {
        "episodes": count,
        "ways": ways.summary(),
        "shots": shots.summary(),
        "query_per_class": query_per_class.summary(),
        "support_size": support.summary(),
        "query_size": query.summary(),
        "sources": dict(sorted(sources.items())),
        "splits": dict(sorted(splits.items())),
    }


def format_statistics(stats: dict[str, Any]) -> str:
    """The statistics as an aligned text table."""
    lines = [f"episodes: {stats['episodes']}"]
    columns = ["mean", "min", *[f"p{p}" for p in PERCENTILES], "max"]
    lines.append(f"{'':16s}" + "".join(f"{c:>9s}" for c in columns))
    for key in ("ways", "shots", "query_per_class", "support_size", "query_size"):
        row = stats[key]
        if not row.get("count"):
            continue
        lines.append(f"{key:16s}" + "".join(f"{row[c]:9.1f}" for c in columns))
    if len(stats["sources"]) > 1 or len(stats["splits"]) > 1:
        lines.append("sources: " + ", ".join(f"{k}={v}" for k, v in stats["sources"].items()))
        lines.append("splits: " + ", ".join(f"{k}={v}" for k, v in stats["splits"].items()))
    return "\n".join(lines)
