"""Labeled Faces in the Wild (Huang et al. 2007) from `lfw.tgz`, `lfw-funneled.tgz` or
`lfw-deepfunneled.tgz`, or their extracted `lfw/`, `lfw_funneled/`, `lfw-deepfunneled/` folders,
all laid out as `<root>/<Person_Name>/<Person_Name>_NNNN.jpg`.

Choices:
- Classes are people, named as their folders. Only people with at least `--lfw-min-images`
  files are kept (default 10: the ATG paper's LFW10 taskset, 158 people in the full data);
  like scikit-learn's `fetch_lfw_people(min_faces_per_person=...)`, every file of a person's
  folder counts, so a corrupt file counts toward the threshold and is then rejected.
- Class ids follow scikit-learn's `target_names` order (names with '_' read as ' ', sorted),
  so ids match the LFW10 class indices of the ATG paper's Table 9. No fixed class split
  unless `--split-fractions` draws one.
- Default: the 250x250 originals, re-encoded by the shared writer (RGB JPEG).
  `--lfw-sklearn-crop` reproduces scikit-learn's LFW loader instead: crop rows 70:195 and
  columns 78:172, resize by 0.5 to 62x47 with PIL's default filter, then average the colour
  channels unless `--lfw-color` (scikit-learn's `color=False` default; the ATG paper's LFW10
  uses RGB, i.e. `--lfw-color`). Those images are stored as lossless PNG, each pixel the
  scikit-learn value times 255, rounded.
- Several variants under one input need `--lfw-variant`; an extracted folder is preferred to
  its archive (same data, no decompression).
- A .tgz is listed once while planning (one decompression pass). Work units are groups of
  people contiguous in the archive (about `--lfw-images-per-unit` images each); a worker
  re-opens the archive and seeks forward to its members, so each unit decompresses the archive
  up to its last member: for the 13,233 images, a handful of passes over ~200 MB in all.
  Extracted folders give one unit per person.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from beam_pipelines.conversion.image_codec import ImageOptions, ImageRejected, decode_image
from beam_pipelines.sources._lib.archive_members import (
    TarMember,
    describe,
    list_tar_members,
    read_tar_members,
)
from beam_pipelines.sources._lib.folder_entries import Skipped, list_entries
from beam_pipelines.sources._lib.fraction_split import (
    FractionSplitConfig,
    fraction_rule,
    fraction_splits,
)
from beam_pipelines.sources._lib.raw_downloads import TfdsRegistered
from beam_pipelines.sources._lib.source_config import option
from beam_pipelines.sources.base import (
    ClassInfo,
    ConversionPlan,
    LayoutError,
    RawItem,
    Source,
    WorkUnit,
    require_input,
)
from episodes.records.dataset_spec import Split
from episodes.storage.parallel_reads import read_in_order
from episodes.storage.paths import input_location

__all__ = [
    "IMAGES_PER_UNIT",
    "LfwConfig",
    "LfwSource",
    "MIN_IMAGES",
    "SKLEARN_BOX",
    "sklearn_face",
    "sklearn_order",
    "SKLEARN_SIZE",
    "VARIANTS",
]

# variant -> (archive name, root folder inside it / extracted folder name)
VARIANTS = {
    "lfw": ("lfw.tgz", "lfw"),
    "funneled": ("lfw-funneled.tgz", "lfw_funneled"),
    "deepfunneled": ("lfw-deepfunneled.tgz", "lfw-deepfunneled"),
}
MIN_IMAGES = 10
IMAGES_PER_UNIT = 1000
# scikit-learn fetch_lfw_people defaults: slice_=(slice(70, 195), slice(78, 172)), resize=0.5.
SKLEARN_BOX = (78, 70, 172, 195)  # (left, top, right, bottom)
SKLEARN_SIZE = (47, 62)  # (width, height) = int(0.5 * 94), int(0.5 * 125)


def sklearn_face(data: bytes, color: bool) -> np.ndarray:
    """scikit-learn's LFW face of one JPEG as uint8: crop, resize by 0.5, gray = channel mean."""
    image = decode_image(data).convert("RGB")
    image = image.crop(SKLEARN_BOX).resize(SKLEARN_SIZE)  # PIL's default filter, as sklearn
    face = np.asarray(image, dtype=np.float32) / 255.0
    if not color:
        face = face.mean(axis=2)
    return np.clip(np.round(face * 255.0), 0, 255).astype(np.uint8)


def sklearn_order(name: str) -> str:
    """scikit-learn sorts target names after replacing '_' by ' '."""
    return name.replace("_", " ")


def _scan_folder(root: Path) -> tuple[dict[str, list[str]], list[Skipped]]:
    """{person: [image paths]} and the entries skipped (beam_pipelines.sources._lib.folder_entries)."""
    people = {}
    top = list_entries(root)
    skipped = list(top.skipped)  # top-level files are the distribution's lists (pairs.txt, ...)
    for folder in top.folders:
        inside = list_entries(folder, [root])
        skipped += inside.skipped + [
            (str(f), "a folder inside a person's folder") for f in inside.folders
        ]
        people[folder.name] = [str(f) for f in inside.files]
    return people, skipped


def _scan_tar(path: Path, root: str) -> dict[str, list[TarMember]]:
    people: dict[str, list[TarMember]] = defaultdict(list)
    tops = set()
    for member in list_tar_members(path):
        pieces = member.name.removeprefix("./").split("/")
        tops.add(pieces[0])
        if len(pieces) == 3 and pieces[0] == root:
            people[pieces[1]].append(member)
    if not people:
        raise LayoutError(
            f"{path}: no {root}/<Person_Name>/<file>.jpg members (found top-level "
            f"{sorted(tops)[:5]}); expected the layout of {path.name}"
        )
    return {name: sorted(files, key=lambda m: m.name) for name, files in people.items()}


@dataclass(frozen=True)
class LfwConfig(FractionSplitConfig):
    lfw_min_images: int = option(
        MIN_IMAGES, "keep people with at least this many images (default 10: LFW10)", minimum=0
    )
    lfw_variant: str | None = option(
        None, "which LFW variant to read when several are present", choices=sorted(VARIANTS)
    )
    lfw_sklearn_crop: bool = option(
        False, "store scikit-learn's 62x47 crop-and-resize (fetch_lfw_people)"
    )
    lfw_color: bool = option(
        False, "with --lfw-sklearn-crop: keep RGB (default: channel mean, as sklearn)"
    )
    lfw_images_per_unit: int = option(
        IMAGES_PER_UNIT, "images per work unit for a .tgz input", minimum=1
    )


class LfwSource(Source):
    name = "lfw"
    layout = (
        "lfw.tgz / lfw-funneled.tgz / lfw-deepfunneled.tgz or the extracted lfw/ (lfw_funneled/, "
        "lfw-deepfunneled/) folder of <Person_Name>/<Person_Name>_NNNN.jpg"
    )
    default_image_format = "jpeg"
    default_mode = "RGB"
    remote_input = True  # listed and read through episodes.storage.paths
    downloads = (TfdsRegistered("lfw", "lfw.tgz"),)  # TFDS's lfw/checksums.tsv; read as is

    config_class = LfwConfig

    def image_options(self) -> ImageOptions:
        config = self.config
        if not config.lfw_sklearn_crop:
            return super().image_options()
        return ImageOptions(
            image_format=config.image_format or "png",
            mode=config.image_mode or ("RGB" if config.lfw_color else "L"),
            jpeg_quality=config.jpeg_quality or 95,
            resize=config.resize,
        )

    def _locate(self, input_path: Path) -> tuple[str, str, Path]:
        """(variant, 'folder' | 'tar', path) of the LFW data to read."""
        require_input(input_path, f"a folder holding {self.layout}")
        found: dict[str, tuple[str, Path]] = {}
        for variant, (archive, root) in VARIANTS.items():
            if input_path.is_file() and input_path.name == archive:
                found[variant] = ("tar", input_path)
            elif input_path.is_dir() and input_path.name == root:
                found[variant] = ("folder", input_path)
            elif input_path.is_dir() and (input_path / root).is_dir():
                found[variant] = ("folder", input_path / root)
            elif input_path.is_dir() and (input_path / archive).is_file():
                found[variant] = ("tar", input_path / archive)
        if not found:
            present = (
                sorted(p.name for p in input_path.iterdir())[:8] if input_path.is_dir() else []
            )
            raise LayoutError(
                f"{input_path}: no LFW archive or folder (found {present}); expected {self.layout}"
            )
        wanted = self.config.lfw_variant
        if wanted is not None:
            if wanted not in found:
                raise LayoutError(
                    f"{input_path}: --lfw-variant {wanted}: no {VARIANTS[wanted][0]} or "
                    f"{VARIANTS[wanted][1]}/ (found {sorted(found)})"
                )
            return wanted, *found[wanted]
        if len(found) > 1:
            raise LayoutError(
                f"{input_path}: several LFW variants found ({', '.join(sorted(found))}); "
                "choose one with --lfw-variant"
            )
        variant = next(iter(found))
        return variant, *found[variant]

    def plan(self, input_path: Path) -> ConversionPlan:
        input_path = input_location(input_path)  # a local Path or a listed object-store folder
        min_images, per_unit = self.config.lfw_min_images, self.config.lfw_images_per_unit
        variant, kind, path = self._locate(input_path)
        root = VARIANTS[variant][1]
        people, skipped = _scan_folder(path) if kind == "folder" else (_scan_tar(path, root), [])
        people = {name: files for name, files in people.items() if files}
        if not people:
            raise LayoutError(
                f"{path}: no <Person_Name>/ folders with images; expected {self.layout}"
            )
        kept = sorted((n for n, f in people.items() if len(f) >= min_images), key=sklearn_order)
        if not kept:
            largest = max(len(f) for f in people.values())
            raise LayoutError(
                f"{path}: no person has {min_images} images (at most {largest}); "
                "lower --lfw-min-images"
            )
        splits = fraction_splits(kept, self.config)
        order = {Split.TRAIN: 0, Split.VALID: 1, Split.TEST: 2, None: 3}
        kept = sorted(kept, key=lambda n: (order[splits[n]], sklearn_order(n)))
        if kind == "folder":
            units = [
                WorkUnit(
                    name,
                    ("folder", str(path), name, tuple(people[name])),
                    len(people[name]),
                    whole_class=name,
                )
                for name in kept
            ]
        else:
            units = self._tar_units(path, {n: people[n] for n in kept}, per_unit)
        return ConversionPlan(
            source=self.name,
            dataset_name="lfw" if min_images <= 1 else f"lfw{min_images}",
            classes=[ClassInfo(name, splits[name]) for name in kept],
            units=units,
            image_options=self.image_options(),
            skipped=skipped,
            provenance={
                "input": str(input_path.resolve()),
                "variant": variant,
                "read_from": f"{kind}:{path.name}",
                "min_images": min_images,
                "people_found": len(people),
                "images_found": sum(len(f) for f in people.values()),
                "class_order": "scikit-learn target_names order ('_' read as ' ', sorted)",
                "images": self._image_rule(),
                "split_rule": fraction_rule(self.config),
            },
        )

    def _image_rule(self) -> str:
        if not self.config.lfw_sklearn_crop:
            return "250x250 originals"
        colour = "RGB" if self.config.lfw_color else "channel mean (gray)"
        return f"scikit-learn crop rows 70:195, cols 78:172, resize 0.5 -> 62x47, {colour}"

    @staticmethod
    def _tar_units(path: Path, people: dict[str, list[TarMember]], per_unit: int) -> list[WorkUnit]:
        """Groups of people contiguous in the archive, about `per_unit` images each."""
        by_position = sorted(people, key=lambda n: min(m.offset for m in people[n]))
        units, group = [], []
        for name in by_position:
            group += [(m.name, m.offset, m.size, name) for m in people[name]]
            if len(group) >= per_unit or name == by_position[-1]:
                units.append(
                    WorkUnit(
                        f"archive-{len(units):04d}", ("tar", str(path), tuple(group)), len(group)
                    )
                )
                group = []
        return units

    def _item(self, class_name: str, key: str, where: str, data: bytes) -> RawItem:
        if not self.config.lfw_sklearn_crop:
            return RawItem(class_name, key, where, data=data)
        try:
            face = sklearn_face(data, self.config.lfw_color)
        except (ImageRejected, OSError, ValueError, Image.DecompressionBombError) as exc:
            return RawItem(class_name, key, where, error=str(exc))
        return RawItem(class_name, key, where, array=face)

    def read_unit(self, unit: WorkUnit) -> Iterator[RawItem]:
        if unit.payload[0] == "folder":
            _, _, class_name, files = unit.payload
            for file, data in zip(files, read_in_order(files)):  # objects: several at once
                key = file.rsplit("/", 1)[-1]
                if isinstance(data, OSError):
                    yield RawItem(class_name, key, file, error=f"unreadable: {data}")
                    continue
                yield self._item(class_name, key, file, data)
            return
        _, path, group = unit.payload
        members = [TarMember(name, offset, size) for name, offset, size, _ in group]
        owner = {name: person for name, _, _, person in group}
        for member, data, error in read_tar_members(path, members):
            key, where = member.name.rsplit("/", 1)[-1], describe(path, member.name)
            if error is not None:
                yield RawItem(owner[member.name], key, where, error=error)
            else:
                yield self._item(owner[member.name], key, where, data)
