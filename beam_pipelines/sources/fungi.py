"""Fungi (FGVCx 2018): `images/<folder>/*.JPG` with COCO-style `train.json` and `val.json`
(`categories`, `images`, `annotations`).

The two annotated parts are pooled (the challenge's test part has no labels). Classes are named
`NNNN.<category name>` with the 4-digit category id (e.g. `0226.Cortinarius malicorius`), as the
published split lists name them. Both files must list the same categories.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from beam_pipelines.sources._lib.image_file_units import FileEntry, file_units, find_layout_root
from beam_pipelines.sources._lib.input_files import read_json_input
from beam_pipelines.sources._lib.listed_split_source import LayoutScan, ListedSplitSource
from beam_pipelines.sources._lib.raw_downloads import Published
from beam_pipelines.sources.base import LayoutError

__all__ = ["category_class_name", "FungiSource", "load_coco_part", "PARTS", "WRAPPERS"]

PARTS = ("train.json", "val.json")
WRAPPERS = ("fungi",)


def load_coco_part(path: Path) -> dict:
    raw = read_json_input(path)
    missing = [
        k for k in ("categories", "images", "annotations") if not isinstance(raw.get(k), list)
    ]
    if missing:
        raise LayoutError(f"{path}: missing COCO-style list(s) {missing}")
    return raw


def category_class_name(category: dict) -> str:
    """`NNNN.<name>`: the reference's class name for a Fungi category."""
    return f"{int(category['id']):04d}.{category['name']}"


class FungiSource(ListedSplitSource):
    name = "fungi"
    layout = "images/<folder>/*.JPG with train.json and val.json (COCO-style)"
    # Not registered by TFDS. URLs and MD5s from the challenge's README
    # (visipedia/fgvcx_fungi_comp, "Data"); Meta-Dataset's conversion notes point at the same
    # two archives. No SHA-256 or exact size is published. Extracted: images/, train.json, val.json.
    downloads = (
        Published(
            url="https://labs.gbif.org/fgvcx/2018/fungi_train_val.tgz",
            file_name="fungi_train_val.tgz",
            origin="MD5 from visipedia/fgvcx_fungi_comp README",
            md5="df2b2980835668ed1d9a0e286e4bdadd",
            extract=True,
        ),
        Published(
            url="https://labs.gbif.org/fgvcx/2018/train_val_annotations.tgz",
            file_name="train_val_annotations.tgz",
            origin="MD5 from visipedia/fgvcx_fungi_comp README",
            md5="c3c0f1b8a8d0b60619c43d9c89bdbc7e",
            extract=True,
        ),
    )

    def scan(self, input_path: Path) -> LayoutScan:
        root = find_layout_root(input_path, PARTS[0], WRAPPERS)
        missing = [p for p in PARTS if root is None or not (root / p).is_file()]
        if root is None or missing or not (root / "images").is_dir():
            raise LayoutError(
                f"{input_path}: not an FGVCx Fungi layout: missing "
                f"{missing or ['images/']}; expected {self.layout}"
            )
        parts = {p: load_coco_part(root / p) for p in PARTS}
        categories = {int(c["id"]): c for c in parts[PARTS[0]]["categories"]}
        other = {int(c["id"]): c for c in parts[PARTS[1]]["categories"]}
        if {i: c["name"] for i, c in categories.items()} != {
            i: c["name"] for i, c in other.items()
        }:
            raise LayoutError(f"{root}: train.json and val.json list different categories")
        images: dict[int, dict] = {}
        for part, raw in parts.items():
            for image in raw["images"]:
                if int(image["id"]) in images:
                    raise LayoutError(f"{root / part}: image id {image['id']} appears twice")
                images[int(image["id"])] = image
        labels: dict[int, int] = {}
        for part, raw in parts.items():
            for annotation in raw["annotations"]:
                image_id, category = int(annotation["image_id"]), int(annotation["category_id"])
                if image_id not in images:
                    raise LayoutError(f"{root / part}: annotation of unknown image id {image_id}")
                if category not in categories:
                    raise LayoutError(f"{root / part}: unknown category id {category}")
                if labels.setdefault(image_id, category) != category:
                    raise LayoutError(f"{root / part}: image id {image_id} has two categories")
        class_files: dict[str, list[FileEntry]] = defaultdict(list)
        skipped = []
        for image_id, image in sorted(images.items()):
            path = root / image["file_name"]
            if image_id not in labels:
                skipped.append((str(path), "image without an annotation"))
                continue
            class_name = category_class_name(categories[labels[image_id]])
            class_files[class_name].append(FileEntry(image["file_name"], str(path)))
        class_names = sorted(category_class_name(c) for c in categories.values())
        return LayoutScan(
            root,
            class_names,
            file_units(class_files),
            skipped,
            {"categories": len(categories), "annotated_images": len(labels)},
        )
