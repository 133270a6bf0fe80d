"""A tiny Oxford 102 flowers: `vgg_flower/jpg/image_NNNNN.jpg` and `imagelabels.mat` (MATLAB
v5, a 1 x N double array of 1-based labels, as distributed); one image is truncated."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.io import savemat

from tests.raw_fixtures.fixture_info import (
    RawFixture,
    start_fixture,
    tiny_image,
    truncated,
    write_file,
)

TOP = "vgg_flower"


def write_vgg_flower_fixture(
    root: Path, seed: int = 0, classes: Sequence[str] | None = None, images_per_class: int = 1
) -> RawFixture:
    rng, names, base = start_fixture(root, "vgg_flower", TOP, seed, classes)
    slots = [name for name in names for _ in range(images_per_class)] + [names[0]]
    order = rng.permutation(len(slots))  # images of a class are spread over the numbering
    labels = []
    corrupt = ""
    for index, slot in enumerate(order, start=1):
        name = slots[slot]
        labels.append(int(name.split(".", 1)[0]))
        data = tiny_image(rng, 14, 18)
        if slot == len(slots) - 1:
            data, corrupt = truncated(data), f"jpg/image_{index:05d}.jpg"
        write_file(base / "jpg" / f"image_{index:05d}.jpg", data)
    savemat(str(base / "imagelabels.mat"), {"labels": np.asarray([labels], dtype=np.float64)})
    counts = {name: images_per_class for name in names}
    return RawFixture(base, names, counts, [corrupt])
