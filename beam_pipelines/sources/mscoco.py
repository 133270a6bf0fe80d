"""MSCOCO (train2017): `train2017/<NNNNNNNNNNNN>.jpg` and the instance annotations
`annotations/instances_train2017.json` (or `instances_train2017.json` beside `train2017/`).

One example per object instance: the image cropped to the instance's box. Meta-Dataset's
appendix ("MSCOCO") says only that the train2017 split is used and that crops come from each
instance's ground-truth box; the reference converter (and so the published dataset, 860,001
examples) enlarges each box by 1.2 about its centre, converts COCO's half-integer corners to
whole pixels, clips to the image and keeps crowd annotations and tiny boxes. We do the same:
`--mscoco-box-scale-ratio` (default 1.2, must be >= 1) and `--mscoco-exclude-crowd` change it.
Class names are the category names (e.g. `traffic light`); all classes are valid or test.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from beam_pipelines.sources._lib.input_files import read_json_input
from beam_pipelines.sources._lib.listed_split_source import LayoutScan, ListedSplitSource
from beam_pipelines.sources._lib.published_splits import ListedSplitConfig
from beam_pipelines.sources._lib.raw_downloads import TfdsRegistered
from beam_pipelines.sources._lib.source_config import option
from beam_pipelines.sources.base import LayoutError, RawItem, WorkUnit
from episodes.storage.parallel_reads import read_in_order

__all__ = [
    "ANNOTATIONS",
    "DEFAULT_BOX_SCALE",
    "DEFAULT_IMAGES_PER_UNIT",
    "enlarged_box",
    "MSCOCOConfig",
    "MSCOCOSource",
    "WRAPPERS",
]

ANNOTATIONS = ("annotations/instances_train2017.json", "instances_train2017.json")
WRAPPERS = ("mscoco", "coco")
DEFAULT_BOX_SCALE = 1.2
DEFAULT_IMAGES_PER_UNIT = 500


def enlarged_box(bbox: Sequence[float], scale: float) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) pixel crop of a COCO box (x, y, width, height) scaled by
    `scale` about its centre; COCO corners are half-integer, PIL crops whole pixels, so each
    side is rounded after a half-pixel shift and the far sides are inclusive (+1). The writer
    clips the result to the image."""
    x, y, w, h = (float(v) for v in bbox)
    x -= 0.5 * w * (scale - 1.0)
    y -= 0.5 * h * (scale - 1.0)
    w, h = w * scale, h * scale
    return (
        int(round(x - 0.5)),
        int(round(y - 0.5)),
        int(round(x + w - 0.5)) + 1,
        int(round(y + h - 0.5)) + 1,
    )


@dataclass(frozen=True)
class MSCOCOConfig(ListedSplitConfig):
    mscoco_box_scale_ratio: float = option(
        DEFAULT_BOX_SCALE,
        "enlarge every box by this factor about its centre (default 1.2, as the reference; >= 1)",
        minimum=1.0,
    )
    mscoco_exclude_crowd: bool = option(
        False, "leave out iscrowd=1 annotations (the reference keeps them)"
    )
    mscoco_images_per_unit: int = option(DEFAULT_IMAGES_PER_UNIT, "images per work unit", minimum=1)


class MSCOCOSource(ListedSplitSource):
    name = "mscoco"
    layout = "train2017/*.jpg and annotations/instances_train2017.json"
    split_fractions = (0.0, 0.5, 0.5)
    config_class = MSCOCOConfig
    downloads = (  # TFDS's coco registration; extracted to train2017/ and annotations/
        TfdsRegistered("coco", "train2017.zip", extract=True),
        TfdsRegistered("coco", "annotations_trainval2017.zip", extract=True),
    )

    def _locate(self, input_path: Path) -> tuple[Path, Path]:
        for root in (input_path, *(input_path / w for w in WRAPPERS)):
            for name in ANNOTATIONS:
                if (root / name).is_file() and (root / "train2017").is_dir():
                    return root, root / name
        raise LayoutError(
            f"{input_path}: not an MSCOCO train2017 layout: expected train2017/ and "
            f"{' or '.join(ANNOTATIONS)} here or in {WRAPPERS[0]}/"
        )

    def scan(self, input_path: Path) -> LayoutScan:
        root, annotation_path = self._locate(input_path)
        scale = self.config.mscoco_box_scale_ratio
        exclude_crowd = self.config.mscoco_exclude_crowd
        per_unit = self.config.mscoco_images_per_unit
        raw = read_json_input(annotation_path)
        if not all(isinstance(raw.get(k), list) for k in ("categories", "annotations")):
            raise LayoutError(
                f"{annotation_path}: expected COCO 'categories' and 'annotations' lists"
            )
        categories = {int(c["id"]): str(c["name"]) for c in raw["categories"]}
        file_names = {int(i["id"]): str(i["file_name"]) for i in raw.get("images", [])}
        per_image: dict[int, list[tuple[str, str, tuple | None, str | None]]] = defaultdict(list)
        crowd_left_out = 0
        for annotation in raw["annotations"]:
            category = int(annotation["category_id"])
            if category not in categories:
                raise LayoutError(
                    f"{annotation_path}: annotation {annotation.get('id')} has unknown "
                    f"category id {category}"
                )
            if exclude_crowd and annotation.get("iscrowd"):
                crowd_left_out += 1
                continue
            image_id = int(annotation["image_id"])
            key = f"{image_id:012d}_{int(annotation['id']):012d}"
            box, error = None, None
            try:
                box = enlarged_box(annotation["bbox"], scale)
            except (KeyError, TypeError, ValueError):
                error = f"annotation {annotation.get('id')}: bbox {annotation.get('bbox')!r} is not x, y, w, h"
            per_image[image_id].append((categories[category], key, box, error))
        units = []
        image_ids = sorted(per_image)
        for start in range(0, len(image_ids), per_unit):
            images = tuple(
                (str(root / "train2017" / file_names.get(i, f"{i:012d}.jpg")), tuple(per_image[i]))
                for i in image_ids[start : start + per_unit]
            )
            count = sum(len(a) for _, a in images)
            units.append(WorkUnit(f"images#{start // per_unit:06d}", images, count))
        return LayoutScan(
            root,
            sorted(set(categories.values())),
            units,
            provenance={
                "annotations": str(annotation_path)[len(str(root)) + 1 :],
                "box_scale_ratio": scale,
                "crowd_annotations_left_out": crowd_left_out,
                "instances": sum(len(a) for a in per_image.values()),
            },
        )

    def read_unit(self, unit: WorkUnit) -> Iterator[RawItem]:
        paths = [path for path, _ in unit.payload]
        for (path, instances), data in zip(unit.payload, read_in_order(paths)):
            if isinstance(data, OSError):
                data, reason = None, f"unreadable: {data.strerror or data}"
            for class_name, key, box, error in instances:
                where = f"{path}#{key.split('_')[1].lstrip('0') or '0'}"
                if error or data is None:
                    yield RawItem(class_name, key, where, error=error or reason)
                else:
                    yield RawItem(class_name, key, where, data=data, crop_box=box)
