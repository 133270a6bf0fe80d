"""A tiny Quick Draw `numpy_bitmap` folder: `quickdraw/<category>.npy`, each an N x 784 uint8
array of 28 x 28 drawings. The first category's file is truncated (a cut download)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tests.raw_fixtures.fixture_info import RawFixture, start_fixture

TOP = "quickdraw"
SIDE = 28


def drawings(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` rows of 784 uint8: a white stroke on black, as the bitmaps are stored."""
    images = np.zeros((count, SIDE, SIDE), dtype=np.uint8)
    for image in images:
        r = int(rng.integers(2, 26))
        image[r, 2:26] = 255
        image[2:26, int(rng.integers(2, 26))] = 255
    return images.reshape(count, SIDE * SIDE)


def write_quickdraw_fixture(
    root: Path, seed: int = 0, classes: Sequence[str] | None = None, images_per_class: int = 2
) -> RawFixture:
    rng, names, base = start_fixture(root, "quickdraw", TOP, seed, classes)
    base.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name in names:
        np.save(base / f"{name}.npy", drawings(rng, images_per_class))
        counts[name] = images_per_class
    corrupt = f"{names[0]}.npy"
    data = (base / corrupt).read_bytes()
    (base / corrupt).write_bytes(data[: len(data) - SIDE * SIDE // 2])
    counts[names[0]] = 0
    return RawFixture(base, names, counts, [corrupt])
