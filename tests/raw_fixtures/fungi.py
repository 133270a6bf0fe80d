"""A tiny FGVCx Fungi 2018: `fungi/images/<folder>/<file>.JPG` with COCO-style `train.json`
and `val.json` (the same categories; images and annotations split between them). One extra
image is truncated and one is listed without an annotation."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tests.raw_fixtures.fixture_info import (
    RawFixture,
    start_fixture,
    tiny_image,
    truncated,
    write_file,
)

TOP = "fungi"


def write_fungi_fixture(
    root: Path, seed: int = 0, classes: Sequence[str] | None = None, images_per_class: int = 1
) -> RawFixture:
    rng, names, base = start_fixture(root, "fungi", TOP, seed, classes)
    categories = sorted(
        ({"id": int(n[:4]), "name": n[5:], "supercategory": "Fungi"} for n in names),
        key=lambda c: c["id"],
    )
    parts = {
        "train.json": {"images": [], "annotations": []},
        "val.json": {"images": [], "annotations": []},
    }
    image_id = 0

    def add(category: dict, data: bytes, annotate: bool = True) -> str:
        nonlocal image_id
        image_id += 1
        folder = f"{category['id'] + 10000:05d}_{category['name'].split(' (')[0].replace(' ', '_')}"
        rel = f"images/{folder}/AF{image_id:06d}.JPG"
        write_file(base / rel, data)
        part = parts["train.json" if image_id % 4 else "val.json"]
        part["images"].append({"id": image_id, "file_name": rel, "width": 10, "height": 10})
        if annotate:
            part["annotations"].append(
                {"id": image_id, "image_id": image_id, "category_id": category["id"]}
            )
        return rel

    for category in categories:
        for _ in range(images_per_class):
            add(category, tiny_image(rng, 10, 10))
    corrupt = add(categories[0], truncated(tiny_image(rng, 10, 10)))
    unannotated = add(categories[-1], tiny_image(rng, 10, 10), annotate=False)
    for file_name, part in parts.items():
        payload = {"info": {"year": 2018}, "categories": categories, **part}
        (base / file_name).write_text(json.dumps(payload))
    counts = {name: images_per_class for name in names}
    return RawFixture(base, names, counts, [corrupt], [unannotated])
