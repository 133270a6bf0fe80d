"""The two episode types: a description (which classes, and which records of each class) and
an `Episode` (its images and labels as numpy arrays).

A description is small and pure data, so it can be computed anywhere (Beam worker, DataLoader
worker) and turned into pixels later by the reader (`episodes.reading.reader`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from episodes.records.dataset_spec import Split

__all__ = ["ARRAY_FIELDS", "Episode", "EpisodeDescription", "episode_labels"]


@dataclass(frozen=True)
class EpisodeDescription:
    """Classes of an episode and, per class, the record numbers of support and query examples.

    Position i in `class_ids` is episode label i (0..N-1); record numbers index the records of
    that class's `{class_id}.tfrecords` file in file order.
    """

    source: str
    split: Split
    episode_index: int
    class_ids: tuple[int, ...]
    support: tuple[tuple[int, ...], ...]
    query: tuple[tuple[int, ...], ...]

    @property
    def ways(self) -> int:
        return len(self.class_ids)

    @property
    def shots(self) -> tuple[int, ...]:
        return tuple(len(s) for s in self.support)

    @property
    def support_size(self) -> int:
        return sum(len(s) for s in self.support)

    @property
    def query_size(self) -> int:
        return sum(len(q) for q in self.query)

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "split": self.split.value,
            "episode_index": self.episode_index,
            "class_ids": list(self.class_ids),
            "support": [list(s) for s in self.support],
            "query": [list(q) for q in self.query],
        }

    @classmethod
    def from_json(cls, raw: dict) -> EpisodeDescription:
        return cls(
            source=raw["source"],
            split=Split.parse(raw["split"]),
            episode_index=int(raw["episode_index"]),
            class_ids=tuple(int(c) for c in raw["class_ids"]),
            support=tuple(tuple(int(i) for i in s) for s in raw["support"]),
            query=tuple(tuple(int(i) for i in q) for q in raw["query"]),
        )


ARRAY_FIELDS = (
    "support_images",
    "support_labels",
    "support_class_ids",
    "query_images",
    "query_labels",
    "query_class_ids",
)  # an Episode's numpy arrays, as adapters and learners take them


@dataclass(frozen=True, eq=False)
class Episode:
    """One episode as numpy arrays; images (n, H, W, 3), labels 0..ways-1, absolute class ids."""

    support_images: np.ndarray
    support_labels: np.ndarray
    support_class_ids: np.ndarray
    query_images: np.ndarray
    query_labels: np.ndarray
    query_class_ids: np.ndarray
    source: str
    split: str
    episode_index: int
    class_names: tuple[str, ...]

    @property
    def ways(self) -> int:
        return len(self.class_names)

    @property
    def shots(self) -> np.ndarray:
        return np.bincount(self.support_labels, minlength=self.ways)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def episode_labels(description: EpisodeDescription) -> tuple[np.ndarray, ...]:
    """(support_labels, support_class_ids, query_labels, query_class_ids) as int64 arrays."""
    ids = np.array(description.class_ids, dtype=np.int64)
    positions = np.arange(len(ids), dtype=np.int64)
    out = []
    for groups in (description.support, description.query):
        labels = positions.repeat([len(g) for g in groups])
        out.extend((labels, ids[labels]))
    return tuple(out)
