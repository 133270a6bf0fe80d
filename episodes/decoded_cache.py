"""Decoded cache: per class one memory-mappable uint8 `.npy` array of shape (N, H, W, 3).

Layout: `<dataset>/decoded_<H>x<W>/{class_id}.npy` plus `manifest.json` naming the size, the
interpolation and a hash of the spec's classes (names, image counts, file pattern), so a cache
made for other records is detected. The folder is written under a temporary name and renamed
into place, so a reader never sees a half-written cache. Reading gathers rows with numpy fancy
indexing from memory maps kept in a bounded LRU (each map holds one file descriptor).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from episodes.atomic_files import atomic_path, replace_folder, staging_folder
from episodes.dataset_spec import DatasetSpec
from episodes.image_decode import INTERPOLATION, decode_image_into
from episodes.record_reader import CorruptRecordError, RecordReader

CACHE_FORMAT = "fewshot-tasksets.decoded_cache/1"
MANIFEST = "manifest.json"


class DecodedCacheError(ValueError):
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
    reader: RecordReader, class_id: int, size: int, map_fn: Callable | None = None
) -> np.ndarray:
    """All records of one class decoded to (N, size, size, 3) uint8, in record order."""
    count = reader.num_records(class_id)
    out = np.empty((count, size, size, 3), dtype=np.uint8)

    def one(k: int) -> None:
        image, _ = reader.read_example(class_id, k)
        try:
            decode_image_into(image, out[k])
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


def write_class_array(array: np.ndarray, folder: str | os.PathLike, class_id: int) -> Path:
    """Write one class's array as `{class_id}.npy` (temp name + rename)."""
    target = Path(folder) / f"{class_id}.npy"
    with atomic_path(target) as tmp, open(tmp, "wb") as stream:
        np.save(stream, array, allow_pickle=False)
    return target


def manifest_for(spec: DatasetSpec, size: int, counts: Sequence[int]) -> dict:
    return {
        "format": CACHE_FORMAT,
        "dataset": spec.name,
        "height": size,
        "width": size,
        "channels": 3,
        "dtype": "uint8",
        "interpolation": INTERPOLATION,
        "spec_hash": spec_hash(spec),
        "num_classes": spec.num_classes,
        "images": [int(c) for c in counts],
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
    classes: Iterable[int] | None = None,
    cache_root: str | os.PathLike | None = None,
    map_fn: Callable | None = None,
    progress: Callable[[int, int], None] | None = None,
    overwrite: bool = True,
    index_cache_dir: str | os.PathLike | None = None,
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
    class_ids = list(range(spec.num_classes)) if classes is None else list(classes)
    counts = [0] * spec.num_classes
    try:
        for done, class_id in enumerate(class_ids, 1):
            array = decode_class(reader, class_id, size, map_fn)
            write_class_array(array, tmp, class_id)
            counts[class_id] = int(array.shape[0])
            if progress is not None:
                progress(done, len(class_ids))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        reader.close()
    return finish_cache(tmp, target, manifest_for(spec, size, counts), overwrite)


class DecodedCache:
    """Read side: gathers decoded rows of a class from memory maps (bounded LRU of maps)."""

    def __init__(self, folder: str | os.PathLike, spec: DatasetSpec, size: int, max_open: int = 64):
        self.folder = Path(folder)
        self.size = size
        self.max_open = max(1, max_open)
        manifest_file = self.folder / MANIFEST
        if not manifest_file.exists():
            raise DecodedCacheError(f"{self.folder}: no {MANIFEST} (not a complete decoded cache)")
        try:
            manifest = json.loads(manifest_file.read_text())
        except json.JSONDecodeError as exc:
            raise DecodedCacheError(f"{manifest_file}: not valid JSON ({exc})") from exc
        if manifest.get("format") != CACHE_FORMAT:
            raise DecodedCacheError(
                f"{manifest_file}: format {manifest.get('format')!r}, expected {CACHE_FORMAT!r}"
            )
        if (manifest.get("height"), manifest.get("width")) != (size, size):
            raise DecodedCacheError(
                f"{manifest_file}: cache holds {manifest.get('height')}x{manifest.get('width')} "
                f"images, {size}x{size} requested"
            )
        if manifest.get("spec_hash") != spec_hash(spec):
            raise DecodedCacheError(
                f"{manifest_file}: made for other records (spec hash differs from dataset "
                f"{spec.name!r}); rebuild it with python -m beam_pipelines.cache"
            )
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
    ) -> DecodedCache | None:
        """The cache for `spec` and `size` if one exists (beside the records or under cache_root)."""
        if spec.root is None:
            return None
        candidates = [cache_path(spec.root, size)]
        if cache_root is not None:
            candidates.insert(0, cache_path(spec.root, size, cache_root))
        for folder in candidates:
            if (folder / MANIFEST).exists():
                return cls(folder, spec, size, max_open)
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
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
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
