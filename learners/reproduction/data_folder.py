"""The converted datasets under `--data`: one folder per source (DIR/omniglot/, ...), each with
its dataset_spec.json, read for the facts a plan sizes its stages by (classes, images per split)."""

from __future__ import annotations

import json
from pathlib import Path

from learners.reproduction.plan_parts import SourceFacts

__all__ = ["converted_sources", "source_facts", "SPEC"]

SPEC = "dataset_spec.json"


def source_facts(folder: Path) -> SourceFacts | None:
    """The facts of one converted dataset folder, None when it holds no readable spec."""
    try:
        spec = json.loads((folder / SPEC).read_text())
    except (OSError, ValueError):
        return None
    images = {int(c["id"]): int(c.get("images", 0)) for c in spec.get("classes") or []}
    if not images:  # the reference Meta-Dataset spec: images_per_class by class id
        images = {int(k): int(v) for k, v in (spec.get("images_per_class") or {}).items()}
    splits = spec.get("splits") if isinstance(spec.get("splits"), dict) else {}
    return SourceFacts(
        name=folder.name,
        classes=len(images),
        images=sum(images.values()),
        split_images={
            name: sum(images.get(int(i), 0) for i in ids) for name, ids in splits.items()
        },
    )


def converted_sources(data: Path) -> dict[str, SourceFacts]:
    """Every converted dataset directly under `data`, by folder name."""
    found = {}
    for folder in sorted(p for p in data.iterdir() if p.is_dir()):
        facts = source_facts(folder)
        if facts is not None:
            found[folder.name] = facts
    return found
