"""EMNIST (Cohen et al. 2017) from NIST's gzip IDX files: `gzip.zip` (members
`gzip/emnist-<split>-{train,test}-{images-idx3,labels-idx1}-ubyte.gz` and
`gzip/emnist-<split>-mapping.txt`), the extracted `gzip/` folder, or the loose `.gz` files.

Choices:
- `--emnist-split` picks one of byclass (62 classes, the default and the ATG paper's EMNIST:
  814,255 images of digits, uppercase and lowercase letters), bymerge (47), balanced (47),
  letters (26, raw labels 1..26), digits (10) or mnist (10).
- Class names are the characters ('0', 'A', 'a'), read from `emnist-<split>-mapping.txt`
  ("label ascii [ascii]" lines) when present, else from the published mapping of the split;
  merged classes (letters, and the merged letters of bymerge/balanced) take the uppercase
  character. Class ids follow the raw label order.
- `--emnist-parts train,test` (default both): the train and test images are pooled per
  class (keys `train-0000042`, `test-0000007`); EMNIST's train/test split is an image split,
  not a class split, so classes have no split unless `--split-fractions` draws one.
- Images are stored upright: IDX rows hold the transposed character, so each 28x28 image is
  transposed before it is written as a grayscale PNG. `--no-idx-transpose` keeps the rows as
  they are, for IDX files stored upright (MNIST, Fashion-MNIST renamed to the EMNIST names).
- `--class-names FILE` names the classes (one name per line, in raw label order) instead of
  the mapping's characters.
- Planning reads the IDX headers and the (small) label files: a missing file, a file of
  another split, or a label count that differs from the image count stops with a clear
  error before the pipeline. Labels outside the split's range are listed as rejected rows.
  Images are read in workers by row ranges (`--emnist-rows-per-unit`, 50,000 by default) with a
  forward seek in the gzip stream; a truncated images file yields one rejected item per
  missing row (named `<file>[row]`) instead of failing the conversion. A forward seek
  decompresses what it skips, so a unit costs a decompression up to its last row: 50,000-row
  units keep that to about half a pass over the file per unit.
"""

from __future__ import annotations

import gzip
import re
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from beam_pipelines.sources._lib.archive_members import (
    STREAM_ERRORS,
    describe,
    open_archive_file,
    open_file_or_zip_member,
    zip_names,
)
from beam_pipelines.sources._lib.fraction_split import (
    FractionSplitConfig,
    fraction_rule,
    fraction_splits,
)
from beam_pipelines.sources._lib.raw_downloads import TfdsRegistered
from beam_pipelines.sources._lib.source_config import ConfigError, option
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
from episodes.storage.paths import input_location

__all__ = [
    "DIGITS",
    "EmnistConfig",
    "EmnistSource",
    "FILE_RE",
    "idx_name",
    "KNOWN_SPLITS",
    "Location",
    "LOWER",
    "MAPPING_RE",
    "MERGED_LOWER",
    "PARTS",
    "ROWS_PER_UNIT",
    "SIDE",
    "UPPER",
]

SIDE = 28
IMAGE_MAGIC, LABEL_MAGIC = 2051, 2049
DIGITS = "0123456789"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = UPPER.lower()
MERGED_LOWER = "abdefghnqrt"  # lowercase letters bymerge/balanced keep apart from uppercase
# split -> (first raw label, class characters in label order), the published mappings.
KNOWN_SPLITS: dict[str, tuple[int, str]] = {
    "byclass": (0, DIGITS + UPPER + LOWER),
    "bymerge": (0, DIGITS + UPPER + MERGED_LOWER),
    "balanced": (0, DIGITS + UPPER + MERGED_LOWER),
    "letters": (1, UPPER),
    "digits": (0, DIGITS),
    "mnist": (0, DIGITS),
}
PARTS = ("train", "test")
FILE_RE = re.compile(
    r"^emnist-(?P<split>[a-z]+)-(?P<part>train|test)-(?P<kind>images-idx3|labels-idx1)-ubyte\.gz$"
)
MAPPING_RE = re.compile(r"^emnist-(?P<split>[a-z]+)-mapping\.txt$")
ROWS_PER_UNIT = 50_000
Location = tuple[str, str | None]  # (file or zip path, zip member or None)


def idx_name(split: str, part: str, kind: str) -> str:
    return f"emnist-{split}-{part}-{kind}-ubyte.gz"


def _inventory(input_path: Path) -> tuple[dict[tuple, Location], dict[str, Location], list[str]]:
    """Every EMNIST file under the input: {(split, part, kind): location}, {split: mapping}."""
    files: dict[tuple, Location] = {}
    mappings: dict[str, Location] = {}
    seen: list[str] = []

    def add(name: str, location: Location) -> None:
        base = name.rsplit("/", 1)[-1]
        seen.append(name)
        if m := FILE_RE.match(base):
            files.setdefault((m["split"], m["part"], m["kind"]), location)
        elif m := MAPPING_RE.match(base):
            mappings.setdefault(m["split"], location)

    folders = [input_path, input_path / "gzip"]
    for folder in folders:  # loose files first: they beat the same file inside a zip
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                if path.is_file() and path.suffix != ".zip":
                    add(path.name, (str(path), None))
    zips = [input_path] if input_path.is_file() else sorted(input_path.glob("*.zip"))
    for archive in zips:
        for member in sorted(zip_names(archive)):
            add(member, (str(archive), member))
    return files, mappings, seen


def _is_zip(path: Path) -> bool:
    with open_archive_file(str(path), 2**16) as raw:
        return zipfile.is_zipfile(raw)


def _read_mapping(location: Location) -> dict[int, str]:
    path, member = location
    with open_file_or_zip_member(path, member) as stream:
        text = stream.read().decode("ascii", errors="replace")
    mapping = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            mapping[int(fields[0])] = chr(int(fields[1]))
        except (ValueError, IndexError):
            raise LayoutError(
                f"{describe(path, member)} line {number}: {line!r}; expected 'label ascii_code'"
            ) from None
    return mapping


def _open_idx(location: Location):
    path, member = location
    return open_file_or_zip_member(path, member)


def _read_header(location: Location, magic: int, words: int) -> tuple[int, ...]:
    where = describe(*location)
    try:
        with _open_idx(location) as raw, gzip.GzipFile(fileobj=raw) as stream:
            head = stream.read(4 * words)
    except STREAM_ERRORS as exc:
        raise LayoutError(f"{where}: not a readable gzip IDX file ({exc})") from None
    if len(head) < 4 * words:
        raise LayoutError(f"{where}: {len(head)} bytes; expected an IDX header of {4 * words}")
    values = struct.unpack(f">{words}I", head)
    if values[0] != magic:
        raise LayoutError(f"{where}: IDX magic number {values[0]}; expected {magic}")
    return values


def _read_labels(location: Location) -> np.ndarray:
    where = describe(*location)
    _, count = _read_header(location, LABEL_MAGIC, 2)
    try:
        with _open_idx(location) as raw, gzip.GzipFile(fileobj=raw) as stream:
            data = stream.read()
    except STREAM_ERRORS as exc:
        raise LayoutError(f"{where}: damaged gzip labels file ({exc})") from None
    labels = np.frombuffer(data, dtype=np.uint8, offset=8)
    if len(labels) != count:
        raise LayoutError(f"{where}: {len(labels)} labels; its header says {count}")
    return labels


def _read_class_names(path: Path, split: str, labels: list[int]) -> list[str]:
    """`--class-names FILE`: one name per line, for raw labels labels[0], labels[1], ..."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LayoutError(f"--class-names {path}: cannot read it ({exc})") from None
    names = [line.strip() for line in text.splitlines() if line.strip()]
    if len(names) != len(labels):
        raise LayoutError(
            f"--class-names {path}: {len(names)} names; expected {len(labels)}, one per line for "
            f"raw labels {labels[0]}..{labels[-1]} of split {split!r}"
        )
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise LayoutError(
            f"--class-names {path}: names repeated: {repeated[:5]}; expected distinct"
        )
    return names


@dataclass(frozen=True)
class EmnistConfig(FractionSplitConfig):
    emnist_split: str = option(
        "byclass",
        "EMNIST split to convert (default byclass: 62 classes)",
        choices=sorted(KNOWN_SPLITS),
    )
    emnist_parts: str = option(
        "train,test", "image parts pooled per class: train,test (default), train or test"
    )
    emnist_rows_per_unit: int = option(
        ROWS_PER_UNIT, f"images per work unit (default {ROWS_PER_UNIT:,})", minimum=1
    )
    idx_transpose: bool = option(
        True,
        "transpose each IDX image to store it upright (default: yes, as EMNIST needs; "
        "--no-idx-transpose for IDX files stored upright, e.g. MNIST or Fashion-MNIST)",
    )
    class_names: str | None = option(
        None,
        "class names, one per line in raw label order (default: the characters of the split's "
        "mapping), e.g. the 10 Fashion-MNIST names with --emnist-split mnist",
        metavar="FILE",
    )

    def validate(self) -> None:
        super().validate()
        parts = [p.strip() for p in self.emnist_parts.split(",") if p.strip()]
        if not parts or any(p not in PARTS for p in parts) or len(set(parts)) != len(parts):
            raise ConfigError(
                f"--emnist-parts {self.emnist_parts!r}: expected train, test or train,test"
            )

    @property
    def parts(self) -> list[str]:
        """The image parts to pool, in file order."""
        chosen = {p.strip() for p in self.emnist_parts.split(",")}
        return [p for p in PARTS if p in chosen]


class EmnistSource(Source):
    name = "emnist"
    downloads = (TfdsRegistered("emnist", "gzip.zip"),)  # read as the zip it is
    layout = (
        "gzip.zip, gzip/ or loose emnist-<split>-{train,test}-{images-idx3,labels-idx1}-ubyte.gz "
        "(+ emnist-<split>-mapping.txt)"
    )
    default_image_format = "png"
    default_mode = "L"
    remote_input = True  # listed and read through episodes.storage.paths

    config_class = EmnistConfig

    def _locate(self, input_path: Path, split: str, parts: list[str]):
        require_input(input_path, f"a folder holding {self.layout}")
        if input_path.is_file() and input_path.suffix == ".gz":
            m = FILE_RE.match(input_path.name)
            if m is None:
                raise LayoutError(
                    f"{input_path}: not an EMNIST IDX file name; expected "
                    f"{idx_name(split, 'train', 'images-idx3')} "
                    "and its siblings"
                )
            if m["split"] != split:
                raise LayoutError(
                    f"{input_path}: a file of EMNIST split {m['split']!r}; expected the files of "
                    f"split {split!r} (emnist-{split}-*-ubyte.gz; choose with --emnist-split)"
                )
            input_path = input_path.parent
        elif input_path.is_file() and not _is_zip(input_path):
            raise LayoutError(f"{input_path}: not a folder or zip; expected {self.layout}")
        files, mappings, seen = _inventory(input_path)
        if not files:
            raise LayoutError(
                f"{input_path}: no EMNIST IDX files; expected {self.layout}; "
                f"found {sorted(seen)[:8]}"
            )
        splits_found = sorted({key[0] for key in files})
        if split not in splits_found:
            raise LayoutError(
                f"{input_path}: no files of EMNIST split {split!r} (found splits: "
                f"{', '.join(splits_found)}); expected emnist-{split}-{{train,test}}-"
                "{images-idx3,labels-idx1}-ubyte.gz"
            )
        needed = [(split, p, k) for p in parts for k in ("images-idx3", "labels-idx1")]
        missing = [idx_name(*key) for key in needed if key not in files]
        if missing:
            present = sorted(idx_name(*k) for k in files if k[0] == split)
            raise LayoutError(
                f"{input_path}: missing {', '.join(missing)} (found {present}); "
                "pass --emnist-parts to convert only the parts present"
            )
        return {key: files[key] for key in needed}, mappings.get(split)

    def _class_names(
        self, split: str, mapping_location: Location | None
    ) -> tuple[int, list[str], str]:
        first, chars = KNOWN_SPLITS[split]
        labels = list(range(first, first + len(chars)))
        names_file = self.config.class_names
        if names_file is not None:
            return first, _read_class_names(Path(names_file), split, labels), str(names_file)
        if mapping_location is None:
            return first, list(chars), "published mapping (no mapping file found)"
        mapping = _read_mapping(mapping_location)
        if sorted(mapping) != labels:
            raise LayoutError(
                f"{describe(*mapping_location)}: labels {min(mapping, default=None)}.."
                f"{max(mapping, default=None)} ({len(mapping)} classes); expected "
                f"{labels[0]}..{labels[-1]} ({len(labels)} classes) for split {split!r}"
            )
        names = [mapping[label] for label in labels]
        if len(set(names)) != len(names):
            raise LayoutError(f"{describe(*mapping_location)}: two labels map to one character")
        return first, names, describe(*mapping_location)

    def plan(self, input_path: Path) -> ConversionPlan:
        input_path = input_location(input_path)  # a local Path or a listed object-store folder
        split, parts = self.config.emnist_split, self.config.parts
        rows_per_unit, transpose = self.config.emnist_rows_per_unit, self.config.idx_transpose
        files, mapping_location = self._locate(input_path, split, parts)
        first, names, mapping_origin = self._class_names(split, mapping_location)
        units: list[WorkUnit] = []
        skipped: list[tuple[str, str]] = []
        per_class = np.zeros(len(names), dtype=np.int64)
        for part in parts:
            images_at = files[(split, part, "images-idx3")]
            labels_at = files[(split, part, "labels-idx1")]
            _, n_images, rows, cols = _read_header(images_at, IMAGE_MAGIC, 4)
            if (rows, cols) != (SIDE, SIDE):
                raise LayoutError(
                    f"{describe(*images_at)}: images of {rows}x{cols}; expected 28x28"
                )
            labels = _read_labels(labels_at)
            if len(labels) != n_images:
                raise LayoutError(
                    f"{describe(*labels_at)}: {len(labels)} labels, but "
                    f"{describe(*images_at)} holds {n_images} images; expected equal counts"
                )
            index = labels.astype(np.int64) - first
            bad = np.flatnonzero((index < 0) | (index >= len(names)))
            if len(bad) > len(labels) // 2:
                raise LayoutError(
                    f"{describe(*labels_at)}: {len(bad)} of {len(labels)} labels outside "
                    f"{first}..{first + len(names) - 1}; expected the labels of split {split!r}"
                )
            skipped += [
                (
                    f"{describe(*images_at)}[{i}]",
                    f"label {labels[i]} outside {first}..{first + len(names) - 1} of split {split}",
                )
                for i in bad
            ]
            good = index[(index >= 0) & (index < len(names))]
            per_class += np.bincount(good, minlength=len(names))
            for start in range(0, n_images, rows_per_unit):
                stop = min(start + rows_per_unit, n_images)
                chunk = labels[start:stop]
                expected = int(np.count_nonzero((chunk >= first) & (chunk < first + len(names))))
                payload = (
                    images_at,
                    part,
                    start,
                    stop,
                    chunk.tobytes(),
                    first,
                    tuple(names),
                    transpose,
                )
                units.append(WorkUnit(f"{part}-{start:07d}", payload, expected))
        splits = fraction_splits(names, self.config)
        order = {Split.TRAIN: 0, Split.VALID: 1, Split.TEST: 2, None: 3}
        ranked = sorted(range(len(names)), key=lambda i: (order[splits[names[i]]], i))
        return ConversionPlan(
            source=self.name,
            dataset_name="emnist" if split == "byclass" else f"emnist_{split}",
            classes=[ClassInfo(names[i], splits[names[i]]) for i in ranked],
            units=units,
            image_options=self.image_options(),
            skipped=skipped,
            provenance={
                "input": str(input_path.resolve()),
                "emnist_split": split,
                "parts": parts,
                "files": {f"{p}-{k}": describe(*loc) for (_, p, k), loc in sorted(files.items())},
                "class_names_from": mapping_origin,
                "raw_labels": {names[i]: first + i for i in range(len(names))},
                "images_per_class_in_files": {
                    names[i]: int(per_class[i]) for i in range(len(names))
                },
                "orientation": "IDX rows transposed to upright"
                if transpose
                else "IDX rows stored as they are (--no-idx-transpose)",
                "split_rule": fraction_rule(self.config),
            },
        )

    def read_unit(self, unit: WorkUnit) -> Iterator[RawItem]:
        location, part, start, stop, label_bytes, first, names, transpose = unit.payload
        labels = np.frombuffer(label_bytes, dtype=np.uint8)
        where = describe(*location)
        broken: str | None = None
        with _open_idx(location) as raw, gzip.GzipFile(fileobj=raw) as stream:
            try:
                stream.seek(16 + start * SIDE * SIDE)
            except STREAM_ERRORS as exc:
                broken = f"images file unreadable from row {start} on ({type(exc).__name__}: {exc})"
            for row in range(start, stop):
                data = b""
                if broken is None:
                    try:
                        data = stream.read(SIDE * SIDE)
                    except STREAM_ERRORS as exc:
                        broken = (
                            f"images file unreadable from row {row} on "
                            f"({type(exc).__name__}: {exc})"
                        )
                    else:
                        if len(data) < SIDE * SIDE:
                            broken = f"images file truncated: it ends inside row {row}"
                index = int(labels[row - start]) - first
                if not 0 <= index < len(names):
                    continue  # listed by the plan as a rejected row
                key, path = f"{part}-{row:07d}", f"{where}[{row}]"
                if broken is not None:
                    yield RawItem(names[index], key, path, error=broken)
                    continue
                pixels = np.frombuffer(data, dtype=np.uint8).reshape(SIDE, SIDE)
                pixels = pixels.T.copy() if transpose else pixels.copy()
                yield RawItem(names[index], key, path, array=pixels)


# Optional seeded class splits, shared by the EMNIST, LFW, CIFAR-100 and TFDS sources (none of
# them fixes a class split of its own).
