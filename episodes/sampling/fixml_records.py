"""FIX-ML's record-set files: a fixed support pool (D_c^0) and held-out base examples.

Setlur, Li & Smith, sections 4 and 4.2. Only the types and their JSON files live here, so that
the sampler (which takes a pool or a holdout) and `episodes.sampling.fixml` (which draws them) both
import this module instead of each other.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from episodes.records.dataset_spec import DatasetSpec, Split
from episodes.sampling.sampler_config import SamplerError
from episodes.util.json_files import read_json

__all__ = ["BaseHoldout", "FixedSupportPool", "HOLDOUT_FORMAT", "POOL_FORMAT"]

POOL_FORMAT = "fewshot-tasksets.fixed_support_pool/1"
HOLDOUT_FORMAT = "fewshot-tasksets.base_holdout/1"

_Set = TypeVar("_Set", bound="_RecordSetFile")


def _records_from_json(raw: Mapping[str, Any]) -> dict[int, tuple[int, ...]]:
    return {int(c): tuple(int(r) for r in recs) for c, recs in raw.items()}


class _RecordSetFile:
    """The one JSON file form of both record sets, so they are written and read alike:
    format, dataset, split, the set's size field (SIZE), seed and per-class record numbers."""

    FORMAT: ClassVar[str]
    SIZE: ClassVar[tuple[str, Callable[[Any], Any]]]  # (field and JSON key, its reader)
    dataset: str
    split: str
    seed: int
    records: dict[int, tuple[int, ...]]

    def to_json(self) -> dict[str, Any]:
        size = self.SIZE[0]
        return {
            "format": self.FORMAT,
            "dataset": self.dataset,
            "split": self.split,
            size: getattr(self, size),
            "seed": self.seed,
            "classes": {str(c): list(r) for c, r in sorted(self.records.items())},
        }

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.to_json()) + "\n")

    @classmethod
    def load(cls: type[_Set], path: str | os.PathLike) -> _Set:
        raw = read_json(path, SamplerError)
        if not isinstance(raw, dict) or raw.get("format") != cls.FORMAT:
            raise SamplerError(f"{Path(path)}: not a {cls.FORMAT} file")
        size, read_size = cls.SIZE
        return cls(
            dataset=raw["dataset"],
            split=Split.parse(raw["split"]).value,
            seed=int(raw["seed"]),
            records=_records_from_json(raw["classes"]),
            **{size: read_size(raw[size])},
        )


@dataclass(frozen=True)
class BaseHoldout(_RecordSetFile):
    """Record numbers of each base class reserved for evaluating tau(C_B) (never trained on)."""

    FORMAT: ClassVar[str] = HOLDOUT_FORMAT
    SIZE: ClassVar[tuple[str, Callable[[Any], Any]]] = ("fraction", float)

    dataset: str
    split: str
    fraction: float
    seed: int
    records: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def training_records(self, spec: DatasetSpec) -> dict[int, tuple[int, ...]]:
        """Per class, the records training episodes may use (all but the held-out ones)."""
        out = {}
        for c, held in self.records.items():
            held_set = set(held)
            out[c] = tuple(r for r in range(spec.images_per_class[c]) if r not in held_set)
        return out


@dataclass(frozen=True)
class FixedSupportPool(_RecordSetFile):
    """FIX-ML's D_c^0: for each base class, the k records used as its support in every
    training episode."""

    FORMAT: ClassVar[str] = POOL_FORMAT
    SIZE: ClassVar[tuple[str, Callable[[Any], Any]]] = ("k", int)

    dataset: str
    split: str
    k: int
    seed: int
    records: dict[int, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | os.PathLike) -> FixedSupportPool:
        """The pool in `path`, checked to list exactly k records for every class."""
        pool = super().load(path)
        wrong = [c for c, r in pool.records.items() if len(r) != pool.k]
        if wrong:
            raise SamplerError(f"{path}: class {wrong[0]} does not list k={pool.k} records")
        return pool
