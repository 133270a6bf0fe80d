"""A tiny GTSRB final training set: `GTSRB/Final_Training/Images/000NN/<track>_<frame>.ppm`
with the semicolon CSV `GT-000NN.csv` per class; one extra frame of class 0 is truncated."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tests.raw_fixtures.fixture_info import (
    RawFixture,
    start_fixture,
    tiny_image,
    truncated,
    write_file,
)

TOP = "GTSRB"
HEADER = "Filename;Width;Height;Roi.X1;Roi.Y1;Roi.X2;Roi.Y2;ClassId\n"


def write_traffic_sign_fixture(
    root: Path, seed: int = 0, classes: Sequence[str] | None = None, images_per_class: int = 1
) -> RawFixture:
    rng, names, base = start_fixture(root, "traffic_sign", TOP, seed, classes)
    counts = {}
    for name in names:
        class_id = int(name.split(".", 1)[0])
        folder = base / "Final_Training" / "Images" / f"{class_id:05d}"
        rows = []
        for frame in range(images_per_class):
            size = int(rng.integers(10, 16))
            file_name = f"00000_{frame:05d}.ppm"
            write_file(folder / file_name, tiny_image(rng, size, size, "PPM"))
            rows.append(f"{file_name};{size};{size};1;1;{size - 1};{size - 1};{class_id}\n")
        (folder / f"GT-{class_id:05d}.csv").write_text(HEADER + "".join(rows))
        counts[name] = images_per_class
    first = int(names[0].split(".", 1)[0])
    corrupt = f"Final_Training/Images/{first:05d}/00001_00000.ppm"
    write_file(base / corrupt, truncated(tiny_image(rng, 12, 12, "PPM")))
    return RawFixture(base, names, counts, [corrupt])
