"""Summary statistics of a batch of episode descriptions (ways, shots, support/query sizes),
printed by `python -m episodes.read --stats N` to check a sampler configuration at a glance."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from episodes.episode import EpisodeDescription

PERCENTILES = (5, 25, 50, 75, 95)


def summarize(values: Iterable[float]) -> dict[str, float]:
    """mean, min, max and percentiles p5..p95 of a list of numbers."""
    arr = np.asarray(list(values), dtype=np.float64)
    if arr.size == 0:
        return {"count": 0}
    out = {"count": int(arr.size), "mean": float(arr.mean()), "min": float(arr.min()),
           "max": float(arr.max())}
    for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES)):
        out[f"p{p}"] = float(v)
    return out


def episode_statistics(descriptions: Iterable[EpisodeDescription]) -> dict[str, Any]:
    """Ways, per-class shots, per-class query, support and query sizes of the episodes, each
    summarised (mean, min, max, percentiles), plus episodes per source and split."""
    ways, shots, query_per_class, support, query = [], [], [], [], []
    sources: Counter[str] = Counter()
    splits: Counter[str] = Counter()
    count = 0
    for d in descriptions:
        count += 1
        ways.append(d.ways)
        shots.extend(d.shots)
        query_per_class.extend(len(q) for q in d.query)
        support.append(d.support_size)
        query.append(d.query_size)
        sources[d.source] += 1
        splits[d.split.value] += 1
    return {
        "episodes": count,
        "ways": summarize(ways),
        "shots": summarize(shots),
        "query_per_class": summarize(query_per_class),
        "support_size": summarize(support),
        "query_size": summarize(query),
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
