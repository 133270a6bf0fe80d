"""The benchmarks' data: synthetic JPEG records in the converted-dataset format, made in one
place so that every benchmark measures the same kind of image (a few KB at 84x84, like a photo).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from episodes.records.dataset_spec import DatasetSpec, Split, load_spec
from episodes.records.example_proto import encode_image_example
from episodes.records.record_index import RecordIndex, index_path_for, write_index
from episodes.records.tfrecord_io import write_records


def synthetic_jpeg(rng: np.random.Generator, side: int) -> bytes:
    """A smooth colour field with texture: compresses like a photo (a few KB at 84x84)."""
    y, x = np.mgrid[0:side, 0:side].astype(np.float32) / side
    phase = rng.uniform(0, 6.28, size=3)
    freq = rng.uniform(1, 6, size=3)
    channels = [127 + 100 * np.sin(freq[c] * (x + (c + 1) * y) * 3.14 + phase[c]) for c in range(3)]
    array = np.stack(channels, -1) + rng.normal(0, 12, size=(side, side, 3))
    buffer = io.BytesIO()
    Image.fromarray(np.clip(array, 0, 255).astype(np.uint8)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def write_class(folder: Path, class_id: int, images: list[bytes], index: bool = True) -> None:
    """One class's record file (and, with `index`, its `.index` sidecar)."""
    path = folder / f"{class_id}.tfrecords"
    offsets = write_records(str(path), [encode_image_example(b, class_id) for b in images])
    if index:
        write_index(
            RecordIndex(np.asarray(offsets, np.uint64), path.stat().st_size), index_path_for(path)
        )


def write_jpeg_dataset(
    folder: Path,
    name: str,
    split: Split,
    classes: int = 50,
    per_class: int = 100,
    side: int = 84,
    index: bool = True,
) -> DatasetSpec:
    """`classes` x `per_class` synthetic JPEGs (seed 0) as a dataset whose classes are all in
    `split`; without `index`, no `.index` sidecars (readers build them, as for the reference's)."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    for c in range(classes):
        write_class(folder, c, [synthetic_jpeg(rng, side) for _ in range(per_class)], index)
    split_classes = {s: [] for s in Split}
    split_classes[split] = list(range(classes))
    DatasetSpec(
        name=name,
        class_names=[f"class_{c:02d}" for c in range(classes)],
        images_per_class=[per_class] * classes,
        split_classes=split_classes,
        image_format="jpeg",
    ).save(folder)
    return load_spec(folder)
