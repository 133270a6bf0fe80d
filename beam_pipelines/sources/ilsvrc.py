"""ILSVRC-2012 training images, as distributed or extracted, with the WordNet class DAG.

Accepted inputs (the first found wins):
- `ILSVRC2012_img_train.tar`: a tar of one `<wnid>.tar` per class, each a tar of
  `<wnid>_<n>.JPEG` (the folder holding it, or the file itself). Workers seek to a class's
  member inside the outer tar and read it in place: nothing is extracted to disk.
- a folder of the 1,000 `<wnid>.tar` files (the outer tar extracted once);
- extracted `train/<wnid>/*.JPEG` (the folder holding `train/`, or `train/` itself).
The validation or test set (`ILSVRC2012_img_val.tar`, `ILSVRC2012_val_*.JPEG`) is refused
before the pipeline starts. One work unit per class. Planning lists the members of only the
class archives that have listed duplicates (reading every header of the 140 GB tar would take
minutes); the other classes' counts, used for progress only, are estimated from their sizes.

Images known to duplicate images of CUB-200-2011, Caltech-101 and Caltech-256 (Meta-Dataset
appendix; `reference_data/ImageNet_*_duplicates.txt`) are removed by default and counted per
list in the spec's provenance. The odd files of the archive (a PNG and CMYK JPEGs named .JPEG)
are decoded and stored as RGB by the shared codec.

Hierarchy and split (Meta-Dataset section 3.1; episodes/hierarchy/imagenet_dag.py): the WordNet 3.0 DAG
over the classes, leaves under 'carnivore' valid, under 'device' test, the rest train, each
split with its own sub-DAG; class ids are per-split leaves sorted by WordNet id, train < valid <
test, as in the reference spec. WordNet comes from `--ilsvrc-wordnet` (Debian's wordnet-base,
/usr/share/wordnet) or from ImageNet's `--ilsvrc-is-a` + `--ilsvrc-words` files.

Any of the three layouts may lie in object storage (`--input s3://bucket/imagenet`): planning
lists the prefix once and reads tar headers with small ranged reads; a worker streams its
class archive (or the member of the training tar) with large ranged reads, nothing is
downloaded whole (episodes.storage.paths).

All 1,000 classes (tensorflow-datasets' list) must be present unless
`--ilsvrc-allow-missing-classes`: then the classes are those present, the DAG is built over
them alone (so it differs from the reference's), and the missing ids go to the provenance.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from beam_pipelines.sources._lib.raw_downloads import ObtainByHand
from beam_pipelines.sources._lib.source_config import ConfigError, SourceConfig, option
from beam_pipelines.sources.base import (
    ClassInfo,
    ConversionPlan,
    LayoutError,
    RawItem,
    Source,
    WorkUnit,
)
from episodes.hierarchy.imagenet_dag import (
    TEST_ROOT,
    VALID_ROOT,
    build_imagenet_hierarchy,
    classes_in_id_order,
    ilsvrc_2012_wnids,
)
from episodes.hierarchy.wordnet import (
    DEFAULT_WORDNET_DIR,
    WordNet,
    read_imagenet_is_a,
    read_wordnet,
)
from episodes.storage.parallel_reads import read_in_order
from episodes.storage.paths import (
    input_location,
    is_remote,
    list_objects,
    open_binary,
)
from episodes.util.progress_lines import ProgressLines

__all__ = [
    "ArchiveWindow",
    "DUPLICATE_LISTS",
    "EXPECTED",
    "folder_names",
    "HEADER_READ_BYTES",
    "IlsvrcConfig",
    "IlsvrcSource",
    "inner_file_names",
    "load_duplicate_lists",
    "open_archive",
    "OTHER_SET_FILE",
    "OTHER_SETS",
    "outer_members",
    "REFERENCE_DATA",
    "STREAM_READ_BYTES",
    "TRAIN_TAR",
    "TYPICAL_IMAGE_BYTES",
    "WNID",
]

TRAIN_TAR = "ILSVRC2012_img_train.tar"
OTHER_SETS = {"ILSVRC2012_img_val.tar": "validation", "ILSVRC2012_img_test.tar": "test"}
OTHER_SET_FILE = re.compile(r"^ILSVRC2012_(val|test)_\d+\.JPEG$", re.IGNORECASE)
WNID = re.compile(r"^n\d{8}$")
REFERENCE_DATA = Path(__file__).resolve().parent / "reference_data"
DUPLICATE_LISTS = (
    "ImageNet_CUBirds_duplicates.txt",
    "ImageNet_Caltech101_duplicates.txt",
    "ImageNet_Caltech256_duplicates.txt",
)
TYPICAL_IMAGE_BYTES = 110_000  # the training tar: ~138 GB for 1,281,167 images
HEADER_READ_BYTES = 64 * 2**10  # an object read while listing tar headers
STREAM_READ_BYTES = 8 * 2**20  # an object read while a worker streams a class archive
EXPECTED = (
    f"{TRAIN_TAR} (a tar of <wnid>.tar per class), a folder of <wnid>.tar files, "
    "or train/<wnid>/*.JPEG folders"
)


def load_duplicate_lists(folder: Path = REFERENCE_DATA) -> dict[str, set[tuple[str, str]]]:
    """{list file name: {(wnid, file name)}} from the first column of each duplicate list."""
    lists = {}
    for name in DUPLICATE_LISTS:
        entries = set()
        for line in (folder / name).read_text().splitlines():
            first = line.split("#", 1)[0].strip()
            if first:
                wnid, _, file_name = first.partition("/")
                entries.add((wnid, file_name))
        lists[name] = entries
    return lists


class ArchiveWindow(io.RawIOBase):
    """A read-only, seekable view of `size` bytes at `start` of an open file: an archive
    member read in place (e.g. an inner tar inside the outer training tar)."""

    def __init__(self, handle, start: int, size: int):
        super().__init__()
        self._handle, self._start, self._size, self._pos = handle, start, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self._size - self._pos)
        if count <= 0:
            return 0
        self._handle.seek(self._start + self._pos)
        data = self._handle.read(count)
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)


def folder_names(folder) -> list[str]:
    """Sorted entry names of a local folder or a listed object-store folder."""
    if isinstance(folder, Path):
        return sorted(os.listdir(folder))
    return sorted(p.name for p in folder.iterdir())


def open_archive(path, buffer_bytes: int = STREAM_READ_BYTES):
    """A seekable binary stream of a local file or an object (episodes.storage.paths)."""
    if is_remote(path):
        return open_binary(str(path), buffer_bytes=buffer_bytes)
    return open(path, "rb")


def outer_members(tar_path: Path) -> list[tuple[str, int, int]]:
    """(wnid, data offset, size) of each `<wnid>.tar` member of the training tar, by wnid.

    Raises LayoutError for an unreadable tar or one whose members are not class tars (the
    validation tar holds `ILSVRC2012_val_*.JPEG`)."""
    members, others = [], []
    try:
        with (
            open_archive(tar_path, HEADER_READ_BYTES) as handle,
            tarfile.open(fileobj=handle, mode="r:") as archive,
        ):
            for member in archive:
                name = member.name.removeprefix("./")
                stem = name[:-4] if name.endswith(".tar") else ""
                if member.isfile() and WNID.match(stem):
                    members.append((stem, member.offset_data, member.size))
                elif member.isfile():
                    others.append(name)
    except (tarfile.TarError, OSError) as exc:
        raise LayoutError(
            f"{tar_path}: not a readable tar archive ({exc}); expected {EXPECTED}"
        ) from None
    if any(OTHER_SET_FILE.match(Path(n).name) for n in others[:20]):
        raise LayoutError(
            f"{tar_path}: holds {others[0]} ...: this is the validation/test set; "
            f"expected the training archive {TRAIN_TAR} of <wnid>.tar members"
        )
    if not members:
        raise LayoutError(
            f"{tar_path}: no <wnid>.tar members (found {others[:3]}); expected {EXPECTED}"
        )
    return sorted(members)


def inner_file_names(handle, start: int, size: int) -> list[str]:
    """File names inside a class tar read in place; of a damaged one, those readable (the
    worker reading it reports the damage)."""
    names: list[str] = []
    try:
        with tarfile.open(fileobj=ArchiveWindow(handle, start, size), mode="r:") as archive:
            for member in archive:
                if member.isfile():
                    names.append(Path(member.name).name)
    except (tarfile.TarError, OSError, EOFError):
        pass
    return names


def _refuse_other_set(path: Path, names: list[str]) -> None:
    found = [n for n in names if OTHER_SET_FILE.match(n)]
    if found:
        raise LayoutError(
            f"{path}: holds {found[0]} ({len(found)} such files): this is the validation/test "
            f"set; expected the training archive: {EXPECTED}"
        )


def _bytes_per_image(found) -> float:
    """Mean bytes per image (tar overhead included) of the class archives listed in
    planning, to estimate the others' counts; ILSVRC-2012's own mean without any."""
    listed = [(loc[3], len(names)) for loc, names in found if names and loc[0] != "folder"]
    images = sum(n for _, n in listed)
    return sum(size for size, _ in listed) / images if images else TYPICAL_IMAGE_BYTES


@dataclass(frozen=True)
class IlsvrcConfig(SourceConfig):
    ilsvrc_remove_duplicates: bool = option(
        True, "drop the training images listed in ImageNet_*_duplicates.txt (default: on)"
    )
    ilsvrc_wordnet: str = option(
        str(DEFAULT_WORDNET_DIR),
        "WordNet 3.0 folder holding data.noun (default /usr/share/wordnet, Debian's wordnet-base)",
        metavar="DIR",
    )
    ilsvrc_is_a: str | None = option(
        None, "ImageNet's wordnet.is_a.txt (with --ilsvrc-words) instead of WordNet", metavar="FILE"
    )
    ilsvrc_words: str | None = option(None, "ImageNet's words.txt", metavar="FILE")
    ilsvrc_allow_missing_classes: bool = option(
        False, "convert a subset of the 1,000 classes (DAG built over those present)"
    )

    def validate(self) -> None:
        super().validate()
        if (self.ilsvrc_is_a is None) != (self.ilsvrc_words is None):
            raise ConfigError("--ilsvrc-is-a and --ilsvrc-words must be given together")


class IlsvrcSource(Source):
    name = "ilsvrc_2012"
    raw_folders = ("ILSVRC2012_train", "ilsvrc_2012")
    layout = EXPECTED
    # Behind image-net.org's login; the size comes from TFDS's imagenet2012 registration.
    downloads = (
        ObtainByHand(
            TRAIN_TAR,
            "https://image-net.org/download-images.php (log in; ILSVRC2012 training images)",
            tfds="imagenet2012",
        ),
    )
    default_image_format = "jpeg"
    default_mode = "RGB"
    meta_dataset_pixels = True
    remote_input = True  # listed and streamed through episodes.storage.paths

    config_class = IlsvrcConfig

    # -- planning -------------------------------------------------------------------------

    def _wordnet(self) -> WordNet:
        is_a, words = self.config.ilsvrc_is_a, self.config.ilsvrc_words
        try:
            if is_a is not None:
                return read_imagenet_is_a(is_a, words)
            return read_wordnet(self.config.ilsvrc_wordnet)
        except ValueError as exc:
            raise LayoutError(str(exc)) from None

    def _locate(self, input_path: Path) -> tuple[str, Path]:
        """('tar', training tar) | ('tars', folder of <wnid>.tar) | ('folders', train folder).

        Units read a class as a 'folder', a 'tar' file, or a 'member' of the training tar."""
        if not input_path.exists():
            raise LayoutError(f"{input_path}: not found; expected {EXPECTED}")
        if input_path.is_file():
            if input_path.name in OTHER_SETS:
                raise LayoutError(
                    f"{input_path}: this is the {OTHER_SETS[input_path.name]} set; "
                    f"expected the training archive {TRAIN_TAR}"
                )
            return "tar", input_path
        if (input_path / TRAIN_TAR).is_file():
            return "tar", input_path / TRAIN_TAR
        for folder in (input_path / "train", input_path):
            if not folder.is_dir():
                continue
            entries = folder_names(folder)
            if any(WNID.match(e) and (folder / e).is_dir() for e in entries):
                return "folders", folder
            if any(e.endswith(".tar") and WNID.match(e[:-4]) for e in entries):
                return "tars", folder
        entries = folder_names(input_path)
        for name, which in OTHER_SETS.items():
            if name in entries:
                raise LayoutError(
                    f"{input_path}: holds {name}: this is the {which} set; expected {EXPECTED}"
                )
        _refuse_other_set(input_path, entries)
        for sub in ("val", "validation", "test"):
            if (input_path / sub).is_dir():
                _refuse_other_set(input_path / sub, folder_names(input_path / sub)[:50])
        raise LayoutError(
            f"{input_path}: no ILSVRC-2012 training data (found {entries[:6]}); expected {EXPECTED}"
        )

    def _scan(
        self, kind: str, root: Path, listed: set[str]
    ) -> dict[str, tuple[tuple, list | None]]:
        """{wnid: ((kind, path, start, size), file names)} of every class found.

        Folders are always listed. Class archives are listed only for the wnids in `listed`
        (those with entries in the duplicate lists): reading every header of the 140 GB
        archive costs minutes, so the other classes get None and an estimated count. A
        damaged archive lists what is readable (the worker reports the damage)."""
        found = {}
        if kind == "folders":
            for wnid in folder_names(root):
                folder = root / wnid
                if WNID.match(wnid) and folder.is_dir():
                    names = folder_names(folder)
                    _refuse_other_set(folder, names[:50])
                    found[wnid] = (("folder", str(folder), 0, 0), names)
            return found
        if kind == "tar":
            members = [
                (wnid, "member", str(root), start, size)
                for wnid, start, size in outer_members(root)
            ]
        else:
            members = [
                (e[:-4], "tar", str(root / e), 0, (root / e).stat().st_size)
                for e in folder_names(root)
                if e.endswith(".tar") and WNID.match(e[:-4])
            ]
        bar = ProgressLines(f"{self.name} plan", len(members), "class archives")
        for wnid, unit_kind, path, start, size in members:
            names = None
            if wnid in listed:
                with open_archive(path, HEADER_READ_BYTES) as handle:
                    names = sorted(inner_file_names(handle, start, size))
            found[wnid] = ((unit_kind, path, start, size), names)
            bar.advance()
        return found

    def plan(self, input_path: Path) -> ConversionPlan:
        input_path = input_location(input_path)
        kind, root = self._locate(input_path)
        wordnet = self._wordnet()
        expected_ids = set(ilsvrc_2012_wnids())
        duplicate_lists = load_duplicate_lists()
        listed = {entry for entries in duplicate_lists.values() for entry in entries}
        found = self._scan(kind, root, {wnid for wnid, _ in listed})
        unknown = sorted(set(found) - expected_ids)
        if unknown:
            raise LayoutError(
                f"{root}: {len(unknown)} synsets that are not ILSVRC-2012 classes, e.g. "
                f"{unknown[:5]}; expected only the 1,000 ILSVRC-2012 training classes"
            )
        missing = sorted(expected_ids - set(found))
        if missing and not self.config.ilsvrc_allow_missing_classes:
            raise LayoutError(
                f"{root}: {len(missing)} of the 1,000 ILSVRC-2012 classes are missing, e.g. "
                f"{missing[:5]}; expected all of them (or pass --ilsvrc-allow-missing-classes)"
            )
        remove = self.config.ilsvrc_remove_duplicates
        present = {(wnid, n) for wnid, (_, names) in found.items() for n in names or ()}
        removed = listed & present if remove else set()
        bytes_per_image = _bytes_per_image(found.values())
        hierarchy = build_imagenet_hierarchy(wordnet, found)
        classes, units = [], []
        for wnid, split in classes_in_id_order(hierarchy):
            location, names = found[wnid]
            if names is None:  # an archive not listed in planning
                skip, expected = (), max(1, round(location[3] / bytes_per_image))
            else:
                skip = tuple(sorted(n for n in names if (wnid, n) in removed))
                expected = len(names) - len(skip)
            classes.append(ClassInfo(wnid, split))
            units.append(WorkUnit(wnid, (wnid, *location, skip), expected, whole_class=wnid))
        return ConversionPlan(
            source=self.name,
            dataset_name="ilsvrc_2012",
            classes=classes,
            units=units,
            image_options=self.image_options(),
            dag=hierarchy,
            provenance={
                "input": str(input_path.resolve()),
                "layout": kind,
                "wordnet": wordnet.source,
                "split_rule": f"leaves under carnivore ({VALID_ROOT}) valid, under device "
                f"({TEST_ROOT}) test, the rest train (Meta-Dataset section 3.1)",
                "missing_classes": missing,
                "duplicates": {
                    "removed": remove,
                    "per_list": {
                        name: len(entries & removed) for name, entries in duplicate_lists.items()
                    },
                    "total_removed": len(removed),
                    "listed_and_present": len(listed & present),
                },
            },
        )

    # -- reading (in workers) ---------------------------------------------------------------

    def read_unit(self, unit: WorkUnit) -> Iterator[RawItem]:
        wnid, kind, path, start, size, skip = unit.payload
        skip = set(skip)
        if kind == "folder":
            remote = is_remote(path)
            names = sorted(n for n in list_objects(path) if "/" not in n) if remote else None
            names = [n for n in (names if remote else sorted(os.listdir(path))) if n not in skip]
            files = [f"{path}/{n}" if remote else os.path.join(path, n) for n in names]
            for name, file, data in zip(names, files, read_in_order(files)):
                if isinstance(data, OSError):
                    yield RawItem(wnid, name, file, error=f"unreadable: {data.strerror or data}")
                    continue
                yield RawItem(wnid, name, file, data=data)
            return
        where = f"{path}:{wnid}.tar" if kind == "member" else path
        with open_archive(path) as handle:
            try:
                with tarfile.open(fileobj=ArchiveWindow(handle, start, size), mode="r:") as archive:
                    for member in archive:
                        name = Path(member.name).name
                        if not member.isfile() or name in skip:
                            continue
                        reader = archive.extractfile(member)
                        data = reader.read() if reader is not None else b""
                        yield RawItem(wnid, name, f"{where}/{name}", data=data)
            except (tarfile.TarError, OSError, EOFError) as exc:
                yield RawItem(
                    wnid,
                    "~archive",
                    where,
                    error=f"unreadable class archive ({type(exc).__name__}: {exc})",
                )
