"""A tiny MSCOCO train2017: `mscoco/train2017/<NNNNNNNNNNNN>.jpg` and
`mscoco/annotations/instances_train2017.json` (COCO ids with the real gaps, boxes as
x, y, width, height floats). Extra instances: one crowd annotation (kept by default, as the
reference), one box outside its image and one instance in a truncated image (both rejected)."""

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

TOP = "mscoco"
WIDTH, HEIGHT = 32, 24
MISSING_IDS = {12, 26, 29, 30, 45, 66, 68, 69, 71, 83}  # ids COCO 2017 leaves unused


def coco_ids(count: int) -> list[int]:
    ids, candidate = [], 0
    while len(ids) < count:
        candidate += 1
        if candidate not in MISSING_IDS:
            ids.append(candidate)
    return ids


def write_mscoco_fixture(
    root: Path, seed: int = 0, classes: Sequence[str] | None = None, images_per_class: int = 1
) -> RawFixture:
    rng, names, base = start_fixture(root, "mscoco", TOP, seed, classes)
    categories = [
        {"supercategory": "thing", "id": i, "name": n}
        for i, n in zip(coco_ids(len(names)), sorted(names))
    ]
    by_name = {c["name"]: c["id"] for c in categories}
    instances = [by_name[n] for n in names for _ in range(images_per_class)]
    instances = [instances[i] for i in rng.permutation(len(instances))]
    images, annotations = [], []

    def box() -> list[float]:
        x, y = float(rng.integers(0, WIDTH - 8)) + 0.5, float(rng.integers(0, HEIGHT - 8)) + 0.25
        return [x, y, float(rng.integers(3, WIDTH - x)), float(rng.integers(3, HEIGHT - y)) + 0.5]

    def add_image(data: bytes, image_id: int) -> str:
        file_name = f"{image_id:012d}.jpg"
        write_file(base / "train2017" / file_name, data)
        images.append({"id": image_id, "file_name": file_name, "width": WIDTH, "height": HEIGHT})
        return f"train2017/{file_name}"

    def annotate(image_id: int, category: int, bbox: list[float], crowd: int = 0) -> None:
        annotations.append(
            {
                "id": 900000 + len(annotations),
                "image_id": image_id,
                "category_id": category,
                "bbox": bbox,
                "area": bbox[2] * bbox[3],
                "iscrowd": crowd,
                "segmentation": [],
            }
        )

    image_id = 100
    for start in range(0, len(instances), 2):
        image_id += 3
        add_image(tiny_image(rng, WIDTH, HEIGHT), image_id)
        for category in instances[start : start + 2]:
            annotate(image_id, category, box())
    counts = {n: images_per_class for n in names}
    crowd_class = names[min(1, len(names) - 1)]
    annotate(image_id, by_name[crowd_class], box(), crowd=1)
    counts[crowd_class] += 1
    annotate(image_id, by_name[names[0]], [WIDTH + 5.0, 2.0, 4.0, 4.0])  # outside the image
    corrupt_image = add_image(truncated(tiny_image(rng, WIDTH, HEIGHT)), image_id + 3)
    annotate(image_id + 3, by_name[names[-1]], box())
    raw = {
        "info": {"year": 2017},
        "licenses": [],
        "images": images,
        "annotations": annotations,
        "categories": categories,
    }
    write_file(base / "annotations" / "instances_train2017.json", json.dumps(raw).encode())
    return RawFixture(
        base,
        names,
        counts,
        [corrupt_image],
        details={"crowd_class": crowd_class, "outside_box_class": names[0]},
    )
