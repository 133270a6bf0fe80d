"""What a raw fixture wrote, and the tiny images the Meta-Dataset fixtures are made of."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from episodes.records.published_splits import load_published
from episodes.records.split_file import SPLITS


@dataclass
class RawFixture:
    """A fixture on disk: `root` is the folder to convert (the archive's top folder)."""

    root: Path
    classes: list[str]  # class names as the converter names them, in published-split order
    images_per_class: dict[str, int]  # decodable examples written per class
    corrupt: list[str] = field(default_factory=list)  # inputs the converter must reject
    skipped: list[str] = field(default_factory=list)  # inputs the plan must list as skipped
    details: dict[str, Any] = field(default_factory=dict)  # source-specific facts for tests

    @property
    def total_images(self) -> int:
        return sum(self.images_per_class.values())


def published_classes(dataset: str, classes: Sequence[str] | None = None) -> list[str]:
    """All classes of the published split of `dataset` (train, valid, test order), or the
    given subset checked against it."""
    published = load_published(f"meta_dataset/{dataset}")
    every = [name for split in SPLITS for name in published.classes(split)]
    if classes is None:
        return every
    unknown = [c for c in classes if c not in set(every)]
    if unknown:
        raise ValueError(f"{dataset}: classes not in the published split: {unknown[:3]}")
    return list(classes)


def start_fixture(
    root: Path, dataset: str, top: str, seed: int, classes: Sequence[str] | None
) -> tuple[np.random.Generator, list[str], Path]:
    """What every Meta-Dataset fixture begins with: its seeded generator, its classes (the
    published split's, or the given subset) and its top folder `root/top`."""
    return np.random.default_rng(seed), published_classes(dataset, classes), Path(root) / top


def tiny_image(rng: np.random.Generator, width: int, height: int, fmt: str = "JPEG") -> bytes:
    """A small image of a few random colour blocks, encoded as `fmt` (JPEG, PNG, PPM)."""
    blocks = rng.integers(0, 256, size=(2, 2, 3), dtype=np.uint8)
    pixels = np.kron(blocks, np.ones((height // 2 + 1, width // 2 + 1, 1), dtype=np.uint8))
    image = Image.fromarray(pixels[:height, :width])
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def truncated(data: bytes) -> bytes:
    """The first third of an encoded image: a download cut short."""
    return data[: max(len(data) // 3, 8)]


def write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
