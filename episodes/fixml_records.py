"""FIX-ML's record-set files: a fixed support pool (D_c^0) and held-out base examples.

Setlur, Li & Smith, sections 4 and 4.2. Only the types and their JSON files live here, so that
the sampler (which takes a pool or a holdout) and `episodes.fixml` (which draws them) both
import this module instead of each other.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from episodes.records.dataset_spec import DatasetSpec, Split
from episodes.sampler_config import SamplerError

POOL_FORMAT = "fewshot-tasksets.fixed_support_pool/1"
HOLDOUT_FORMAT = "fewshot-tasksets.base_holdout/1"


def _read_json(path: str | os.PathLike, expected_format: str) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise SamplerError(f"{path}: no such file")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SamplerError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(raw, dict) or raw.get("format") != expected_format:
        raise SamplerError(f"{path}: not a {expected_format} file")
    return raw


def _records_from_json(raw: Mapping[str, Any]) -> dict[int, tuple[int, ...]]:
    return {int(c): tuple(int(r) for r in recs) for c, recs in raw.items()}


@dataclass(frozen=True)
class BaseHoldout:
    """Record numbers of each base class reserved for evaluating tau(C_B) (never trained on)."""

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

    def to_json(self) -> dict[str, Any]:
        return {
            "format": HOLDOUT_FORMAT,
            "dataset": self.dataset,
            "split": self.split,
            "fraction": self.fraction,
            "seed": self.seed,
            "classes": {str(c): list(r) for c, r in sorted(self.records.items())},
        }

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.to_json()) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> BaseHoldout:
        raw = _read_json(path, HOLDOUT_FORMAT)
        return cls(
            dataset=raw["dataset"],
            split=Split.parse(raw["split"]).value,
            fraction=float(raw["fraction"]),
            seed=int(raw["seed"]),
            records=_records_from_json(raw["classes"]),
        )


@dataclass(frozen=True)
class FixedSupportPool:
    """FIX-ML's D_c^0: for each base class, the k records used as its support in every
    training episode."""

    dataset: str
    split: str
    k: int
    seed: int
    records: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": POOL_FORMAT,
            "dataset": self.dataset,
            "split": self.split,
            "k": self.k,
            "seed": self.seed,
            "classes": {str(c): list(r) for c, r in sorted(self.records.items())},
        }

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.to_json()) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> FixedSupportPool:
        raw = _read_json(path, POOL_FORMAT)
        pool = cls(
            dataset=raw["dataset"],
            split=Split.parse(raw["split"]).value,
            k=int(raw["k"]),
            seed=int(raw["seed"]),
            records=_records_from_json(raw["classes"]),
        )
        wrong = [c for c, r in pool.records.items() if len(r) != pool.k]
        if wrong:
            raise SamplerError(f"{path}: class {wrong[0]} does not list k={pool.k} records")
        return pool
