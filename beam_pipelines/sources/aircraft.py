"""FGVC-Aircraft 2013b: `data/images/<id>.jpg`, the variant of every image in
`data/images_variant_{train,val,test}.txt` (or `_trainval` + `_test`) and one box per image in
`data/images_box.txt` (`<id> xmin ymin xmax ymax`).

Classes are the 100 model variants (e.g. `A340-300`, `F-16A/B`), named as in the variant files.
Every image is cropped to its box, which removes other aircraft and the copyright banner at the
bottom (Meta-Dataset appendix, "Aircraft"); the box is passed to the crop as written in the
file, as the reference converter does. An image without a box is reported, not converted.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from beam_pipelines.sources._lib.image_file_units import FileEntry, file_units, find_layout_root
from beam_pipelines.sources._lib.listed_split_source import LayoutScan, ListedSplitSource
from beam_pipelines.sources._lib.raw_downloads import Published
from beam_pipelines.sources.base import LayoutError

__all__ = ["AircraftSource", "read_box_file", "read_variant_file", "VARIANT_PARTS", "WRAPPERS"]

WRAPPERS = ("fgvc-aircraft-2013b",)
VARIANT_PARTS = ("train", "val", "trainval", "test")


def read_variant_file(path: Path) -> dict[str, str]:
    """{image id: variant} of one `images_variant_*.txt` (`<id> <variant with spaces>`)."""
    out = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.rstrip("\r\n").split(" ", 1)
        if len(parts) != 2 or not parts[1].strip():
            raise LayoutError(f"{path}:{number}: expected '<image id> <variant>', got {line!r}")
        out[parts[0]] = parts[1].strip()
    return out


def read_box_file(path: Path) -> dict[str, tuple[int, int, int, int]]:
    """{image id: (xmin, ymin, xmax, ymax)} of `images_box.txt`."""
    out = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            if len(parts) != 5:
                raise ValueError
            out[parts[0]] = tuple(int(v) for v in parts[1:])
        except ValueError:
            raise LayoutError(
                f"{path}:{number}: expected '<image id> xmin ymin xmax ymax', got {line!r}"
            ) from None
    return out


class AircraftSource(ListedSplitSource):
    name = "aircraft"
    raw_folders = ("fgvc-aircraft-2013b", "aircraft")
    layout = (
        "fgvc-aircraft-2013b/data/ with images/<id>.jpg, images_variant_{train,val,test}.txt "
        "and images_box.txt"
    )
    # Not registered by TFDS. The URL is the publisher's
    # (https://www.robots.ox.ac.uk/~vgg/data/fgvc-aircraft/); it links an MD5 page whose figure
    # we could not confirm in public code (one copy there is Food-101's), so no digest is
    # declared: checksum unknown, downloaded only with --allow-unverified.
    downloads = (
        Published(
            url="https://www.robots.ox.ac.uk/~vgg/data/fgvc-aircraft/archives/fgvc-aircraft-2013b.tar.gz",
            file_name="fgvc-aircraft-2013b.tar.gz",
            origin="no digest confirmed in public code",
            extract=True,
        ),
    )

    def scan(self, input_path: Path) -> LayoutScan:
        root = find_layout_root(input_path, "data/images_box.txt", WRAPPERS)
        if root is None:
            raise LayoutError(
                f"{input_path}: not an FGVC-Aircraft layout: no data/images_box.txt here or in "
                f"{WRAPPERS[0]}/; expected {self.layout}"
            )
        data = root / "data"
        images = data / "images"
        if not images.is_dir():
            raise LayoutError(f"{images}: not found; expected the folder of <id>.jpg images")
        present = [p for p in VARIANT_PARTS if (data / f"images_variant_{p}.txt").is_file()]
        has_trainval = "trainval" in present or {"train", "val"} <= set(present)
        if "test" not in present or not has_trainval:
            raise LayoutError(
                f"{data}: variant files found {present}; expected images_variant_train.txt, "
                "images_variant_val.txt and images_variant_test.txt (or _trainval + _test)"
            )
        variants: dict[str, str] = {}
        for part in present:
            path = data / f"images_variant_{part}.txt"
            for image_id, variant in read_variant_file(path).items():
                if variants.setdefault(image_id, variant) != variant:
                    raise LayoutError(
                        f"{path}: image {image_id} has variant {variant!r} here but "
                        f"{variants[image_id]!r} in another variant file"
                    )
        boxes = read_box_file(data / "images_box.txt")
        class_files: dict[str, list[FileEntry]] = defaultdict(list)
        for image_id, variant in sorted(variants.items()):
            path = str(images / f"{image_id}.jpg")
            box = boxes.get(image_id)
            error = None if box is not None else "no bounding box in data/images_box.txt"
            class_files[variant].append(FileEntry(image_id, path, box, error))
        unlisted = sorted(
            (str(p), "image in no images_variant_*.txt")
            for p in images.iterdir()
            if p.suffix == ".jpg" and p.stem not in variants
        )
        return LayoutScan(
            root=root,
            class_names=sorted(class_files),
            units=file_units(class_files),
            skipped=unlisted,
            provenance={"variant_files": present, "crop": "images_box.txt box, as given"},
        )
