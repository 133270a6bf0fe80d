"""Work units made of image files on disk, one unit per class (or per chunk of a large class).

Shared by the sources whose raw data is plain image files (Aircraft, CUB, DTD, Fungi, VGG
Flower, Traffic Signs, MSCOCO): the plan lists (key, path, crop box) entries per class and the
workers read the bytes; decoding and cropping are the writer's job.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from beam_pipelines.sources._lib.folder_entries import list_entries
from beam_pipelines.sources.base import RawItem, WorkUnit
from episodes.storage.parallel_reads import read_in_order

__all__ = [
    "Box",
    "file_units",
    "FileEntry",
    "find_layout_root",
    "IMAGE_SUFFIXES",
    "list_class_folder",
    "read_file_unit",
]

Box = tuple[int, int, int, int]
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".pgm", ".bmp", ".gif", ".tif", ".tiff", ".webp")


@dataclass(frozen=True)
class FileEntry:
    """One image file of a class: `key` orders it in the class file, `error` marks an entry the
    plan already knows to be unusable (e.g. no bounding box)."""

    key: str
    path: str
    crop_box: Box | None = None
    error: str | None = None


def file_units(class_files: Mapping[str, Sequence[FileEntry]], chunk: int = 5000) -> list[WorkUnit]:
    """Units of at most `chunk` entries per class, classes in the mapping's order."""
    units = []
    for class_name, entries in class_files.items():
        entries = sorted(entries, key=lambda e: e.key)
        for start in range(0, len(entries), chunk):
            part = tuple(entries[start : start + chunk])
            if len(entries) <= chunk:
                units.append(WorkUnit(class_name, (class_name, part), len(part), class_name))
            else:
                key = f"{class_name}#{start // chunk:05d}"
                units.append(WorkUnit(key, (class_name, part), len(part)))
    return units


def read_file_unit(unit: WorkUnit) -> Iterator[RawItem]:
    """RawItems of a unit made by `file_units`, in entry order (objects in storage: several
    read at once); unreadable files become error items."""
    class_name, entries = unit.payload
    readable = [entry for entry in entries if not entry.error]
    contents = read_in_order(entry.path for entry in readable)
    for entry in entries:
        if entry.error:
            yield RawItem(class_name, entry.key, entry.path, error=entry.error)
            continue
        data = next(contents)
        if isinstance(data, OSError):
            reason = f"unreadable: {data.strerror or data}"
            yield RawItem(class_name, entry.key, entry.path, error=reason)
            continue
        yield RawItem(class_name, entry.key, entry.path, data=data, crop_box=entry.crop_box)


def list_class_folder(
    folder: Path, skip: Sequence[str] = ()
) -> tuple[list[FileEntry], list[tuple[str, str]]]:
    """Image-file entries of one class folder (keyed by file name) and the (path, reason) pairs
    of entries left out: hidden files, sub-folders, FIFOs, broken or looping links (names in
    `skip` are left out silently)."""
    listing = list_entries(folder)
    entries = []
    skipped = [(p, reason) for p, reason in listing.skipped if Path(p).name not in skip]
    for path in listing.files:
        if path.name in skip:
            continue
        if path.name.startswith("."):
            skipped.append((str(path), "hidden file, not an image of the dataset"))
        else:
            entries.append(FileEntry(path.name, str(path)))
    skipped += [
        (str(p), "sub-folder inside a class folder") for p in listing.folders if p.name not in skip
    ]
    return entries, sorted(skipped)


def find_layout_root(input_path: Path, marker: str, wrappers: Sequence[str]) -> Path | None:
    """The folder holding `marker` (a relative path): `input_path` itself, or one of the
    `wrappers` sub-folders the archive extracts to. None if neither holds it."""
    for candidate in (input_path, *(input_path / w for w in wrappers)):
        if (candidate / marker).exists():
            return candidate
    return None
