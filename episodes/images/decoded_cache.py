"""Decoded cache: per class one memory-mappable uint8 `.npy` array of shape (N, H, W, 3).

Layout: `<dataset>/decoded_<H>x<W>/{class_id}.npy` plus `manifest.json` naming the size, the
resize mode, a hash of the spec's classes (names, image counts, file pattern), so a cache made
for other records is detected, and each class array's size in bytes and SHA-256. The reader
checks every array's size against the manifest when it opens the cache (one `stat` per class:
a truncated or replaced array is refused at once); `python -m beam_pipelines.verify` checks the
checksums. The folder is written under a temporary name and renamed into place, so a reader
never sees a half-written cache. Reading gathers rows with numpy fancy indexing from memory
maps kept in a bounded LRU (each map holds one file descriptor).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from episodes.images.image_decode import DEFAULT_RESIZE, check_resize, decode_image_into
from episodes.records.dataset_spec import DatasetSpec
from episodes.records.record_reader import CorruptRecordError, RecordReader
from episodes.util.atomic_files import atomic_path, replace_folder, staging_folder
from episodes.util.cli_errors import UserError
from episodes.util.json_files import read_json_object
from episodes.util.npy_maps import open_npy_map

__all__ = [
    "CACHE_FORMAT",
    "ClassArray",
    "DecodedCache",
    "DecodedCacheError",
    "MANIFEST",
    "NPY_HEADER_MAX",
    "cache_dir_name",
    "cache_path",
    "decode_class",
    "file_sha256",
    "finish_cache",
    "manifest_for",
    "read_manifest",
    "spec_hash",
    "verify_cache",
    "write_class_array",
    "write_decoded_cache",
]

CACHE_FORMAT = "fewshot-tasksets.decoded_cache/2"  # /2: resize mode, array sizes, SHA-256s
MANIFEST = "manifest.json"


class DecodedCacheError(UserError, ValueError):
    """A decoded cache that is missing, incomplete or made for different records."""


def cache_dir_name(size: int) -> str:
    return f"decoded_{size}x{size}"


def cache_path(
    dataset_dir: str | os.PathLike, size: int, root: str | os.PathLike | None = None
) -> Path:
    """Where the cache of `dataset_dir` for `size` lives (under `root` when given)."""
    dataset_dir = Path(dataset_dir)
    if root is None:
        return dataset_dir / cache_dir_name(size)
    return Path(root) / dataset_dir.resolve().name / cache_dir_name(size)


def spec_hash(spec: DatasetSpec) -> str:
    """Hash of what determines the cache content: class names, image counts, file pattern.

    Splits are not included: a split file re-partitions classes without changing records."""
    content = json.dumps(
        {
            "name": spec.name,
            "class_names": list(spec.class_names),
            "images_per_class": [int(n) for n in spec.images_per_class],
            "file_pattern": spec.file_pattern,
        },
        sort_keys=True,
    )
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def decode_class(
    reader: RecordReader,
    class_id: int,
    size: int,
    map_fn: Callable | None = None,
    resize: str = DEFAULT_RESIZE,
) -> np.ndarray:
    """All records of one class decoded to (N, size, size, 3) uint8, in record order."""
    count = reader.num_records(class_id)
    out = np.empty((count, size, size, 3), dtype=np.uint8)

    def one(k: int) -> None:
        image, _ = reader.read_example(class_id, k)
        try:
            decode_image_into(image, out[k], resize)
        except ValueError as exc:
            raise CorruptRecordError(
                f"undecodable image: file {reader.records_path(class_id)}, class {class_id}, "
                f"record {k}: {exc}"
            ) from exc

    if map_fn is None:
        for k in range(count):
            one(k)
    else:
        list(map_fn(one, range(count)))
    return out


@dataclass(frozen=True)
class ClassArray:
    """What the manifest records of one class array: image count, file size, SHA-256."""

    images: int
    nbytes: int
    sha256: str


def file_sha256(path: str | os.PathLike, block: int = 1 << 22) -> str:
    """SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def write_class_array(array: np.ndarray, folder: str | os.PathLike, class_id: int) -> ClassArray:
    """Write one class's array as `{class_id}.npy` (temp name + rename); return its entry."""
    target = Path(folder) / f"{class_id}.npy"
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as stream:
            # header, then the bytes through Python's write: numpy's own file write reports a
            # full disk as "N requested and M written" with no errno; this raises ENOSPC
            header = np.lib.format.header_data_from_array_1_0(array)
            np.lib.format.write_array_header_1_0(stream, header)
            stream.write(np.ascontiguousarray(array).data)
        entry = ClassArray(int(array.shape[0]), tmp.stat().st_size, file_sha256(tmp))
    return entry


def manifest_for(
    spec: DatasetSpec, size: int, arrays: Sequence[ClassArray], resize: str = DEFAULT_RESIZE
) -> dict:
    return {
        "format": CACHE_FORMAT,
        "dataset": spec.name,
        "height": size,
        "width": size,
        "channels": 3,
        "dtype": "uint8",
        "resize": check_resize(resize),
        "spec_hash": spec_hash(spec),
        "num_classes": spec.num_classes,
        "images": [a.images for a in arrays],
        "array_bytes": [a.nbytes for a in arrays],
        "sha256": [a.sha256 for a in arrays],
        "file_pattern": "{}.npy",
    }


def finish_cache(tmp: Path, target: Path, manifest: dict, overwrite: bool = True) -> Path:
    """Write the manifest into `tmp` and move it to `target`, replacing an old cache."""
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    if target.exists() and not overwrite:
        shutil.rmtree(tmp)
        raise DecodedCacheError(f"{target}: a decoded cache exists (pass overwrite)")
    return replace_folder(tmp, target)


def write_decoded_cache(
    spec: DatasetSpec,
    size: int = 84,
    *,
    cache_root: str | os.PathLike | None = None,
    map_fn: Callable | None = None,
    progress: Callable[[int, int], None] | None = None,
    overwrite: bool = True,
    index_cache_dir: str | os.PathLike | None = None,
    resize: str = DEFAULT_RESIZE,
) -> Path:
    """Decode every record of `spec`'s dataset into the cache folder; return that folder.

    Memory holds one class at a time. `map_fn` (e.g. a thread pool's map) decodes a class's
    images in parallel."""
    if spec.root is None:
        raise DecodedCacheError(f"spec {spec.name!r} was not loaded from a dataset folder")
    if size < 1:
        raise DecodedCacheError(f"cache image size must be >= 1, got {size}")
    target = cache_path(spec.root, size, cache_root)
    tmp = staging_folder(target)
    reader = RecordReader(spec.root, spec.file_pattern, index_cache_dir=index_cache_dir)
    arrays = []
    try:
        for class_id in range(spec.num_classes):
            array = decode_class(reader, class_id, size, map_fn, resize)
            arrays.append(write_class_array(array, tmp, class_id))
            if progress is not None:
                progress(class_id + 1, spec.num_classes)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        reader.close()
    return finish_cache(tmp, target, manifest_for(spec, size, arrays, resize), overwrite)


NPY_HEADER_MAX = 4096  # bytes of .npy header (np.save writes 128 for these arrays)


def _rebuild_hint(spec: DatasetSpec, size: int, resize: str) -> str:
    return (
        f"rebuild it: python -m beam_pipelines.cache --dataset {spec.root} --image-size {size} "
        f"--resize {resize} --overwrite"
    )


def read_manifest(
    folder: str | os.PathLike, spec: DatasetSpec, size: int | None = None, resize: str | None = None
) -> dict:
    """The manifest of the cache in `folder`, checked against the spec (and the size and resize
    mode asked for, when given) and against its own class arrays' file sizes (one stat per
    class): a cache made for other records, or with a truncated, missing or replaced array,
    raises DecodedCacheError naming the file and how to rebuild."""
    folder = Path(folder)
    manifest_file = folder / MANIFEST
    manifest = read_json_object(
        manifest_file,
        DecodedCacheError,
        missing=f"{folder}: no {MANIFEST} (not a complete decoded cache)",
    )
    hint = _rebuild_hint(spec, size or manifest.get("height") or 84, resize or DEFAULT_RESIZE)
    if manifest.get("format") != CACHE_FORMAT:
        raise DecodedCacheError(
            f"{manifest_file}: format {manifest.get('format')!r}, expected {CACHE_FORMAT!r}; {hint}"
        )
    if size is not None and (manifest.get("height"), manifest.get("width")) != (size, size):
        raise DecodedCacheError(
            f"{manifest_file}: cache holds {manifest.get('height')}x{manifest.get('width')} "
            f"images, {size}x{size} requested"
        )
    if resize is not None and manifest.get("resize") != resize:
        raise DecodedCacheError(
            f"{manifest_file}: made with resize={manifest.get('resize')!r}, the reader asks for "
            f"resize={resize!r}; read with resize={manifest.get('resize')!r} or {hint}"
        )
    if manifest.get("spec_hash") != spec_hash(spec):
        raise DecodedCacheError(
            f"{manifest_file}: made for other records (spec hash differs from dataset "
            f"{spec.name!r}); {hint}"
        )
    side = int(manifest["height"])
    counts, sizes = manifest.get("images"), manifest.get("array_bytes")
    if not (len(counts) == len(sizes) == len(manifest.get("sha256", ())) == spec.num_classes):
        raise DecodedCacheError(
            f"{manifest_file}: lists {len(counts)} classes, the dataset has {spec.num_classes}; "
            f"{hint}"
        )
    for class_id, (count, nbytes) in enumerate(zip(counts, sizes)):
        path = folder / f"{class_id}.npy"
        try:
            found = path.stat().st_size
        except FileNotFoundError:
            raise DecodedCacheError(f"{path}: class array missing; {hint}") from None
        pixels = int(count) * side * side * 3
        if found != nbytes or not 0 < nbytes - pixels <= NPY_HEADER_MAX:
            raise DecodedCacheError(
                f"{path}: {found} bytes, the manifest says {nbytes} for {count} images of "
                f"{side}x{side} (truncated or replaced); {hint}"
            )
    return manifest


def verify_cache(folder: str | os.PathLike, spec: DatasetSpec) -> list[str]:
    """Problems of the cache in `folder` (empty when sound): its manifest against the spec and
    the file sizes, then every class array's SHA-256 and shape. Reads the whole cache."""
    try:
        manifest = read_manifest(folder, spec)
    except (DecodedCacheError, KeyError, TypeError, ValueError) as exc:
        return [f"decoded cache: {exc}"]
    problems = []
    side = int(manifest["height"])
    for class_id, (count, digest) in enumerate(zip(manifest["images"], manifest["sha256"])):
        path = Path(folder) / f"{class_id}.npy"
        if file_sha256(path) != digest:
            problems.append(f"decoded cache: {path}: SHA-256 differs from the manifest")
            continue
        shape = open_npy_map(path).shape
        if shape != (count, side, side, 3):
            problems.append(f"decoded cache: {path}: shape {shape}, manifest says {count} images")
    return problems


class DecodedCache:
    """Read side: gathers decoded rows of a class from memory maps (bounded LRU of maps)."""

    def __init__(
        self,
        folder: str | os.PathLike,
        spec: DatasetSpec,
        size: int,
        max_open: int = 64,
        resize: str = DEFAULT_RESIZE,
    ):
        self.folder = Path(folder)
        self.size = size
        self.max_open = max(1, max_open)
        try:
            manifest = read_manifest(self.folder, spec, size, resize)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, DecodedCacheError):
                raise
            raise DecodedCacheError(f"{self.folder / MANIFEST}: malformed ({exc!r})") from exc
        self.counts = [int(c) for c in manifest["images"]]
        self._maps: OrderedDict[int, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def find(
        cls,
        spec: DatasetSpec,
        size: int,
        cache_root: str | os.PathLike | None = None,
        max_open: int = 64,
        resize: str = DEFAULT_RESIZE,
    ) -> DecodedCache | None:
        """The cache for `spec` and `size` if one exists (beside the records or under cache_root)."""
        if spec.root is None:
            return None
        candidates = [cache_path(spec.root, size)]
        if cache_root is not None:
            candidates.insert(0, cache_path(spec.root, size, cache_root))
        for folder in candidates:
            if (folder / MANIFEST).exists():
                return cls(folder, spec, size, max_open, resize)
        return None

    def array(self, class_id: int) -> np.ndarray:
        """Memory map of class `class_id`, (N, H, W, 3) uint8."""
        with self._lock:
            arr = self._maps.get(class_id)
            if arr is not None:
                self._maps.move_to_end(class_id)
                return arr
        path = self.folder / f"{class_id}.npy"
        try:
            arr = open_npy_map(path)
        except (OSError, ValueError) as exc:
            raise DecodedCacheError(f"{path}: cannot read decoded class array ({exc})") from exc
        expected = (self.counts[class_id], self.size, self.size, 3)
        if arr.shape != expected or arr.dtype != np.uint8:
            raise DecodedCacheError(
                f"{path}: holds {arr.dtype} {arr.shape}, expected uint8 {expected}"
            )
        # A plain ndarray view of the map (it keeps the mapping alive): `take` on the np.memmap
        # subclass pays subclass bookkeeping on every call, which dominates small gathers.
        arr = arr.view(np.ndarray)
        with self._lock:
            self._maps[class_id] = arr
            while len(self._maps) > self.max_open:
                self._maps.popitem(last=False)
        return arr

    def gather(self, class_id: int, records: Sequence[int], out: np.ndarray) -> None:
        """Copy rows `records` of class `class_id` into `out` (len(records), H, W, 3)."""
        arr = self.array(class_id)
        n = arr.shape[0]
        if records and (min(records) < 0 or max(records) >= n):
            bad = next(k for k in records if not 0 <= k < n)
            raise DecodedCacheError(
                f"{self.folder}: class {class_id} has {n} images, record {bad} asked"
            )
        # mode="clip" (bounds checked above) avoids numpy's buffered copy of mode="raise".
        np.take(arr, np.asarray(records, dtype=np.intp), axis=0, out=out, mode="clip")

    def gather_many(
        self, pieces: Sequence[tuple[int, Sequence[int], int]], out: np.ndarray
    ) -> None:
        """For each (class id, records, first row): copy those rows of the class into
        out[first : first + len(records)] (one `take` per piece, straight into `out`)."""
        maps = self._maps
        for class_id, records, first in pieces:
            count = len(records)
            if not count:
                continue
            arr = maps.get(class_id)  # a hit without the lock (LRU order is a hint)
            if arr is None:
                arr = self.array(class_id)
            if min(records) < 0 or max(records) >= arr.shape[0]:
                self.gather(class_id, records, out[first : first + count])  # the error
            # mode="clip" (bounds checked above) avoids numpy's buffered copy of mode="raise".
            arr.take(records, 0, out[first : first + count], "clip")

    @property
    def open_maps(self) -> int:
        return len(self._maps)

    def close(self) -> None:
        with self._lock:
            self._maps.clear()
