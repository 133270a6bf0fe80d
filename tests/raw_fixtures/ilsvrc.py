"""A tiny ILSVRC-2012 training archive in the distributed layout: `ILSVRC2012_img_train.tar`,
a tar of `<wnid>.tar` per class, each a tar of `<wnid>_<n>.JPEG` (or the same files as a folder
of class tars, or extracted `train/<wnid>/`).

A few real classes of each Meta-Dataset split, with the archive's oddities: a CMYK JPEG, a PNG
saved under a .JPEG name (as n02105855_2933.JPEG is in the real archive), a greyscale JPEG, a
truncated JPEG, and files named in the ImageNet_*_duplicates.txt lists.
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from episodes.records.dataset_spec import Split
from tests.raw_fixtures.fixture_info import write_file

# Real ILSVRC-2012 classes: (wnid, split under Meta-Dataset's carnivore/device rule).
CLASSES = {
    "n01440764": Split.TRAIN,  # tench
    "n01443537": Split.TRAIN,  # goldfish
    "n01531178": Split.TRAIN,  # goldfinch (a CUB-200 duplicate)
    "n02085620": Split.VALID,  # Chihuahua
    "n02105855": Split.VALID,  # Shetland sheepdog (the PNG)
    "n02123045": Split.VALID,  # tabby cat
    "n02133161": Split.VALID,  # American black bear (a Caltech-256 duplicate)
    "n03180011": Split.TEST,  # desktop computer
    "n03197337": Split.TEST,  # digital watch
    "n04090263": Split.TEST,  # rifle (a Caltech-256 duplicate)
}
# Entries of the reference duplicate lists whose classes are above.
DUPLICATES = (
    ("n01531178", "n01531178_12730.JPEG"),  # ImageNet_CUBirds_duplicates.txt
    ("n02133161", "n02133161_3419.JPEG"),  # ImageNet_Caltech256_duplicates.txt
    ("n04090263", "n04090263_2592.JPEG"),  # ImageNet_Caltech256_duplicates.txt
)
CMYK = ("n02123045", "n02123045_1955.JPEG")
PNG = ("n02105855", "n02105855_2933.JPEG")
GREY = ("n01440764", "n01440764_77.JPEG")
CORRUPT = ("n03180011", "n03180011_404.JPEG")
LAYOUTS = ("tar", "tars", "folders")


@dataclass
class IlsvrcFixture:
    """What was written: the input to convert and the expected outcome per class."""

    root: Path  # the folder to pass as --input
    layout: str
    classes: dict[str, Split]
    files: dict[str, list[str]]  # every file written per class, sorted
    duplicates: tuple[tuple[str, str], ...] = DUPLICATES
    corrupt: tuple[str, str] = CORRUPT
    cmyk: tuple[str, str] = CMYK
    png: tuple[str, str] = PNG
    grey: tuple[str, str] = GREY

    def expected_images(self, remove_duplicates: bool = True) -> dict[str, int]:
        """Images the converter should write per class (corrupt file and, by default,
        listed duplicates left out)."""
        counts = {}
        for wnid, names in self.files.items():
            dropped = {self.corrupt} | (set(self.duplicates) if remove_duplicates else set())
            counts[wnid] = sum((wnid, n) not in dropped for n in names)
        return counts


def _encode(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def _image_bytes(rng: np.random.Generator, wnid: str, name: str) -> bytes:
    height, width = int(rng.integers(12, 20)), int(rng.integers(14, 24))
    pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    image = Image.fromarray(pixels, "RGB")
    if (wnid, name) == CMYK:
        return _encode(image.convert("CMYK"), "JPEG")
    if (wnid, name) == PNG:
        return _encode(image, "PNG")
    if (wnid, name) == GREY:
        return _encode(image.convert("L"), "JPEG")
    data = _encode(image, "JPEG")
    if (wnid, name) == CORRUPT:
        return data[: len(data) // 2]
    return data


def _tar_bytes(files: dict[str, bytes]) -> bytes:
    """An uncompressed tar of `files` in name order, with fixed metadata."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(files[name]), 0, 0o644
            archive.addfile(info, io.BytesIO(files[name]))
    return buffer.getvalue()


def write_ilsvrc_fixture(
    root: Path, seed: int = 0, images_per_class: int = 3, layout: str = "tar"
) -> IlsvrcFixture:
    """Write the fixture under `root` in one of LAYOUTS and describe it."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: expected one of {LAYOUTS}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    contents: dict[str, dict[str, bytes]] = {}
    for wnid in sorted(CLASSES):
        names = [f"{wnid}_{1000 + 7 * i}.JPEG" for i in range(images_per_class)]
        names += [n for w, n in (*DUPLICATES, CMYK, PNG, GREY, CORRUPT) if w == wnid]
        contents[wnid] = {name: _image_bytes(rng, wnid, name) for name in sorted(names)}
    if layout == "tar":
        inner = {f"{wnid}.tar": _tar_bytes(files) for wnid, files in contents.items()}
        (root / "ILSVRC2012_img_train.tar").write_bytes(_tar_bytes(inner))
    elif layout == "tars":
        for wnid, files in contents.items():
            (root / f"{wnid}.tar").write_bytes(_tar_bytes(files))
    else:
        for wnid, files in contents.items():
            for name, data in files.items():
                write_file(root / "train" / wnid / name, data)
    return IlsvrcFixture(
        root=root,
        layout=layout,
        classes=dict(CLASSES),
        files={wnid: sorted(files) for wnid, files in contents.items()},
    )


def write_validation_fixture(
    root: Path, seed: int = 0, images: int = 3, as_tar: bool = False
) -> Path:
    """The validation set's layout (`ILSVRC2012_val_%08d.JPEG` files, or their tar), which the
    training converter must refuse."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    files = {
        f"ILSVRC2012_val_{i:08d}.JPEG": _image_bytes(rng, "", "") for i in range(1, images + 1)
    }
    if as_tar:
        (root / "ILSVRC2012_img_val.tar").write_bytes(_tar_bytes(files))
    else:
        for name, data in files.items():
            (root / name).write_bytes(data)
    return root
