"""Where the split files a plan names lie: the ones shipped in `episodes/records/published/`."""

from __future__ import annotations

import json
from pathlib import Path

from episodes.records.published_splits import PUBLISHED_DIR as PUBLISHED

__all__ = ["published_split_file", "train_classes"]


def published_split_file(name: str) -> Path:
    """`episodes/records/published/NAME.json`, e.g. `mini_imagenet/ilsvrc_2012`."""
    return PUBLISHED / f"{name}.json"


def train_classes(path: Path) -> int:
    """How many training classes a split file lists (by name or by index)."""
    values = json.loads(path.read_text())
    named = values.get("train") or []
    return len(named) if named else len((values.get("class_indices") or {}).get("train", []))
