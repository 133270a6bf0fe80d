"""VGG Flower (Oxford 102 flowers): `jpg/image_NNNNN.jpg` and `imagelabels.mat` (MATLAB v5,
`labels`: 1-based class of image i at position i-1).

Classes are named `NNN.<name>` with the 1-based label and the name from the reference
`VggFlower_labels.txt` (e.g. `090.canna lily`), as the published split lists name them.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from beam_pipelines.sources._lib.image_file_units import FileEntry, file_units, find_layout_root
from beam_pipelines.sources._lib.input_files import binary_input
from beam_pipelines.sources._lib.listed_split_source import LayoutScan, ListedSplitSource
from beam_pipelines.sources._lib.published_splits import read_label_list
from beam_pipelines.sources._lib.raw_downloads import TfdsRegistered
from beam_pipelines.sources.base import LayoutError

__all__ = ["read_image_labels", "VggFlowerSource", "WRAPPERS"]

WRAPPERS = ("102flowers", "vgg_flower")


def read_image_labels(path: Path) -> np.ndarray:
    """The 1-based label of every image, from `imagelabels.mat`."""
    from scipy.io import loadmat

    try:
        labels = loadmat(binary_input(path))["labels"]
    except Exception as exc:  # scipy raises many types (MatReadError, ValueError, KeyError, ...)
        raise LayoutError(f"{path}: not a MATLAB file with a 'labels' array ({exc})") from None
    labels = np.asarray(labels).reshape(-1)
    if labels.size == 0 or not np.issubdtype(labels.dtype, np.number):
        raise LayoutError(f"{path}: 'labels' is empty or not numeric ({labels.dtype})")
    if not np.array_equal(labels, np.round(labels)):
        raise LayoutError(f"{path}: 'labels' holds non-integer values")
    return labels.astype(np.int64)


class VggFlowerSource(ListedSplitSource):
    name = "vgg_flower"
    layout = "jpg/image_NNNNN.jpg and imagelabels.mat"
    downloads = (  # TFDS's oxford_flowers102/checksums.tsv; the tgz holds jpg/
        TfdsRegistered("oxford_flowers102", "102flowers.tgz", extract=True),
        TfdsRegistered("oxford_flowers102", "imagelabels.mat"),
    )

    def scan(self, input_path: Path) -> LayoutScan:
        root = find_layout_root(input_path, "imagelabels.mat", WRAPPERS)
        if root is None or not (root / "jpg").is_dir():
            raise LayoutError(
                f"{input_path}: not a VGG Flower layout: expected jpg/ and imagelabels.mat here "
                f"or in {WRAPPERS[0]}/ ({self.layout})"
            )
        names = read_label_list("VggFlower_labels.txt")
        labels = read_image_labels(root / "imagelabels.mat")
        bad = labels[(labels < 1) | (labels > len(names))]
        if bad.size:
            raise LayoutError(
                f"{root / 'imagelabels.mat'}: label {int(bad[0])} outside 1..{len(names)} "
                "(VggFlower_labels.txt)"
            )
        class_files: dict[str, list[FileEntry]] = defaultdict(list)
        for index, label in enumerate(labels, start=1):
            file_name = f"image_{index:05d}.jpg"
            class_name = f"{label:03d}.{names[label - 1]}"
            class_files[class_name].append(FileEntry(file_name, str(root / "jpg" / file_name)))
        listed = {f"image_{i:05d}.jpg" for i in range(1, labels.size + 1)}
        unlisted = sorted(
            (str(p), "image without a label in imagelabels.mat")
            for p in (root / "jpg").iterdir()
            if p.name not in listed
        )
        return LayoutScan(
            root,
            sorted(class_files),
            file_units(class_files),
            unlisted,
            {"labelled_images": int(labels.size)},
        )
