"""A tiny CUB-200-2011: `CUB_200_2011/images/<NNN.Name>/<Name>_<n>.jpg` with `classes.txt`
and `images.txt`; one extra image of the first class is truncated."""

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

TOP = "CUB_200_2011"


def write_cu_birds_fixture(
    root: Path, seed: int = 0, classes: Sequence[str] | None = None, images_per_class: int = 1
) -> RawFixture:
    rng, names, base = start_fixture(root, "cu_birds", TOP, seed, classes)
    image_lines, counts = [], {}
    for name in names:
        species = name.split(".", 1)[1]
        for k in range(images_per_class):
            rel = f"{name}/{species}_{k + 1:04d}_{int(rng.integers(1, 99999))}.jpg"
            write_file(base / "images" / rel, tiny_image(rng, 16, 12))
            image_lines.append(rel)
        counts[name] = images_per_class
    corrupt = f"images/{names[0]}/{names[0].split('.', 1)[1]}_9999_0.jpg"
    write_file(base / corrupt, truncated(tiny_image(rng, 16, 12)))
    ordered = sorted(names, key=lambda n: int(n.split(".", 1)[0]))
    (base / "classes.txt").write_text(
        "".join(f"{n.split('.', 1)[0].lstrip('0')} {n}\n" for n in ordered)
    )
    (base / "images.txt").write_text("".join(f"{i} {p}\n" for i, p in enumerate(image_lines, 1)))
    return RawFixture(root=base, classes=names, images_per_class=counts, corrupt=[corrupt])
