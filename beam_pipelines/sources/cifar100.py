"""CIFAR-100 (Krizhevsky 2009) from `cifar-100-python.tar.gz` (members
`cifar-100-python/{file.txt~,train,test,meta}`) or its extracted `cifar-100-python/` folder.

Choices:
- Classes are the 100 fine labels in label order, named from `meta`'s `fine_label_names`;
  the 20 coarse labels form a two-level hierarchy (`coarse_label_names` as superclasses, in
  coarse label order), which FC100 needs. Each fine class's superclass is read from the data
  (the coarse label its images carry).
- The train (500 per class) and test (100 per class) images are pooled per class, keys
  `train-00042` / `test-00007` (row numbers); no fixed class split (FC100 and the ATG tasksets
  come from split files) unless `--split-fractions` draws one.
- Images are the 32x32 RGB rows (1024 red, 1024 green, 1024 blue values, row-major), stored
  as PNG.
- Planning reads `meta` and both pickles once (one pass over the archive), checks shapes and
  label ranges, and lists rows with an impossible fine label, or a coarse label that contradicts
  their class's superclass, as rejected. Workers read row ranges of a pickle; a process keeps
  the last two pickles it loaded, so a worker decompresses the archive about once per part.
- The pickles are read with an unpickler that only admits numpy arrays and plain Python
  values, so a tampered archive cannot run code.
"""

from __future__ import annotations

import io
import pickle
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from beam_pipelines.sources._lib.archive_members import (
    archive_size,
    describe,
    read_named_tar_members,
)
from beam_pipelines.sources._lib.fraction_split import (
    FractionSplitConfig,
    fraction_rule,
    fraction_splits,
)
from beam_pipelines.sources._lib.raw_downloads import Published
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
from episodes.storage.paths import input_location, is_remote, join

__all__ = [
    "ARCHIVE",
    "Cifar100Config",
    "Cifar100Source",
    "load_pickle",
    "PARTS",
    "rejected_rows",
    "ROOT",
    "ROWS_PER_UNIT",
    "SIDE",
    "superclass_of_fine",
]

ROOT = "cifar-100-python"
ARCHIVE = "cifar-100-python.tar.gz"
PARTS = ("train", "test")
NUM_FINE, NUM_COARSE = 100, 20
ROWS_PER_UNIT = 5000
SIDE = 32
_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
    ("copy_reg", "_reconstructor"),
    ("copyreg", "_reconstructor"),
    ("__builtin__", "object"),
    ("builtins", "object"),
}


class _ArrayUnpickler(pickle.Unpickler):
    """Admits numpy arrays and plain values only (the CIFAR pickles need nothing else)."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        return super().find_class(module, name)


def load_pickle(data: bytes, where: str) -> dict[str, Any]:
    """A CIFAR pickle as a dict with str keys (Python 2 pickles have bytes keys)."""
    try:
        obj = _ArrayUnpickler(io.BytesIO(data), encoding="bytes").load()
    except Exception as exc:  # any damage in a pickle surfaces as one of many types
        raise LayoutError(
            f"{where}: not a readable CIFAR pickle ({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(obj, dict):
        raise LayoutError(f"{where}: a pickled {type(obj).__name__}; expected a dict")
    return {k.decode("latin1") if isinstance(k, bytes) else str(k): v for k, v in obj.items()}


def _names(value: Any, where: str, key: str, count: int) -> list[str]:
    if not isinstance(value, list | tuple):
        raise LayoutError(f"{where}: no {key} list")
    names = [v.decode("latin1") if isinstance(v, bytes) else str(v) for v in value]
    if len(names) != count or len(set(names)) != count:
        raise LayoutError(
            f"{where}: {len(names)} {key}; expected {count} distinct names "
            f"({'CIFAR-10?' if len(names) == 10 else 'not CIFAR-100'})"
        )
    return names


# (kind, path, part) -> loaded pickle dict; shared by plan and in-process workers.
_PART_CACHE: OrderedDict[tuple, dict[str, Any]] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def _stamp(path: str) -> tuple:
    """What identifies a version of the archive or folder at `path` (an object's size; a local
    file's size and modification time)."""
    if is_remote(path):
        return (path, archive_size(path) if not _is_folder(path) else None)
    stat = Path(path).stat()
    return (path, stat.st_size, stat.st_mtime_ns)


def _is_folder(path: str) -> bool:
    return input_location(path).is_dir()


def _remember(key: tuple, value: dict[str, Any]) -> None:
    with _CACHE_LOCK:
        _PART_CACHE[key] = value
        _PART_CACHE.move_to_end(key)
        while len(_PART_CACHE) > len(PARTS):
            _PART_CACHE.popitem(last=False)


def _read_parts(kind: str, path: str, names: list[str]) -> dict[str, bytes]:
    """Raw bytes of `train` / `test` / `meta` from the folder or the archive (one pass)."""
    if kind == "folder":
        folder = input_location(path)
        return {n: (folder / n).read_bytes() for n in names if (folder / n).is_file()}
    found = read_named_tar_members(path, [f"{ROOT}/{n}" for n in names])
    return {n.rsplit("/", 1)[-1]: data for n, data in found.items()}


def _load_part(kind: str, path: str, part: str) -> dict[str, Any]:
    key = (kind, _stamp(path), part)
    with _CACHE_LOCK:
        if key in _PART_CACHE:
            _PART_CACHE.move_to_end(key)
            return _PART_CACHE[key]
    data = _read_parts(kind, path, [part])
    if part not in data:
        raise LayoutError(f"{path}: no {ROOT}/{part}")
    value = load_pickle(data[part], describe(path, f"{ROOT}/{part}" if kind == "tar" else None))
    _remember(key, value)
    return value


def _labels(part_dict: dict[str, Any], key: str, where: str, rows: int) -> np.ndarray:
    labels = np.asarray(part_dict.get(key, []), dtype=np.int64)
    if labels.shape != (rows,):
        raise LayoutError(
            f"{where}: {key} has {labels.size} entries; expected {rows} (one per row)"
        )
    return labels


def superclass_of_fine(parts: list[tuple[np.ndarray, np.ndarray]]) -> dict[int, int]:
    """Superclass of each fine label: the coarse label its valid rows carry most often (ties:
    the smaller id). `parts` holds (fine labels, coarse labels) per pickle."""
    votes: dict[int, Counter] = {}
    for fine, coarse in parts:
        ok = (fine >= 0) & (fine < NUM_FINE) & (coarse >= 0) & (coarse < NUM_COARSE)
        for f, c in zip(fine[ok].tolist(), coarse[ok].tolist(), strict=True):
            votes.setdefault(f, Counter())[c] += 1
    return {f: min(v, key=lambda c: (-v[c], c)) for f, v in sorted(votes.items())}


def rejected_rows(
    fine: np.ndarray,
    coarse: np.ndarray,
    superclass: dict[int, int],
    fine_names: list[str],
    coarse_names: list[str],
) -> list[tuple[int, str]]:
    """(row, reason) of rows with an impossible fine label or a contradicting coarse label."""
    rows = []
    for row, (f, c) in enumerate(zip(fine.tolist(), coarse.tolist(), strict=True)):
        if not 0 <= f < NUM_FINE:
            rows.append((row, f"fine label {f} outside 0..{NUM_FINE - 1}"))
        elif c != superclass[f]:
            rows.append(
                (
                    row,
                    f"coarse label {c} contradicts fine label {f} ({fine_names[f]}), "
                    f"whose superclass is {superclass[f]} ({coarse_names[superclass[f]]})",
                )
            )
    return rows


@dataclass(frozen=True)
class Cifar100Config(FractionSplitConfig):
    cifar100_rows_per_unit: int = option(ROWS_PER_UNIT, "images per work unit", minimum=1)


class Cifar100Source(Source):
    name = "cifar100"
    layout = f"{ARCHIVE} or the extracted {ROOT}/ folder with train, test and meta pickles"
    default_image_format = "png"
    default_mode = "RGB"
    remote_input = True  # listed and read through episodes.storage.paths

    config_class = Cifar100Config
    # TFDS registers only cifar-100-binary.tar.gz, which this source does not read. The python
    # archive's size and SHA-256 are those pinned by Keras (keras/datasets/cifar100.py,
    # `file_hash`) and torchvision's prototype datasets; the publisher gives its MD5
    # (eb9058c3a382ffc7106e4002c42a8d85, on https://www.cs.toronto.edu/~kriz/cifar.html).
    downloads = (
        Published(
            url=f"https://www.cs.toronto.edu/~kriz/{ARCHIVE}",
            file_name=ARCHIVE,
            origin="Keras cifar100 file_hash; MD5 from the publisher's page",
            size=169_001_437,
            sha256="85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7",
            md5="eb9058c3a382ffc7106e4002c42a8d85",
        ),
    )

    def _locate(self, input_path: Path) -> tuple[str, Path]:
        require_input(input_path, f"a folder holding {self.layout}")
        if input_path.is_file():
            return "tar", input_path
        if input_path.name == ROOT and (input_path / "meta").exists():
            return "folder", input_path
        if (input_path / ROOT).is_dir():
            return "folder", input_path / ROOT
        if (input_path / ARCHIVE).is_file():
            return "tar", input_path / ARCHIVE
        present = sorted(p.name for p in input_path.iterdir())[:8]
        hint = ""
        if {"cifar-10-python.tar.gz", "cifar-10-batches-py"} & set(present):
            hint = " (this is CIFAR-10)"
        raise LayoutError(
            f"{input_path}: no {ARCHIVE} or {ROOT}/ (found {present}){hint}; expected {self.layout}"
        )

    def plan(self, input_path: Path) -> ConversionPlan:
        input_path = input_location(input_path)  # a local Path or a listed object-store folder
        rows_per_unit = self.config.cifar100_rows_per_unit
        kind, path = self._locate(input_path)
        raw = _read_parts(kind, str(path), ["meta", *PARTS])
        missing = [n for n in ("meta", *PARTS) if n not in raw]
        if missing:
            raise LayoutError(
                f"{path}: missing {', '.join(f'{ROOT}/{m}' for m in missing)} "
                f"(found {sorted(raw)}); expected {self.layout}"
            )

        def where(n):
            return describe(path, f"{ROOT}/{n}") if kind == "tar" else str(path / n)

        meta = load_pickle(raw.pop("meta"), where("meta"))
        fine_names = _names(
            meta.get("fine_label_names"), where("meta"), "fine_label_names", NUM_FINE
        )
        coarse_names = _names(
            meta.get("coarse_label_names"), where("meta"), "coarse_label_names", NUM_COARSE
        )
        parts = {}
        for part in PARTS:
            loaded = load_pickle(raw.pop(part), where(part))
            data = loaded.get("data")
            if (
                not isinstance(data, np.ndarray)
                or data.dtype != np.uint8
                or data.ndim != 2
                or data.shape[1] != 3 * SIDE * SIDE
            ):
                shape = getattr(data, "shape", None)
                raise LayoutError(
                    f"{where(part)}: data of shape {shape}; expected (rows, 3072) uint8"
                )
            fine = _labels(loaded, "fine_labels", where(part), len(data))
            coarse = _labels(loaded, "coarse_labels", where(part), len(data))
            parts[part] = (fine, coarse)
            _remember((kind, _stamp(str(path)), part), loaded)
        superclass = superclass_of_fine(list(parts.values()))
        empty = [fine_names[f] for f in range(NUM_FINE) if f not in superclass]
        if empty:
            raise LayoutError(f"{path}: fine classes without images: {empty[:5]}")
        skipped, units = [], []
        for part, (fine, coarse) in parts.items():
            bad_rows = set()
            for row, reason in rejected_rows(fine, coarse, superclass, fine_names, coarse_names):
                bad_rows.add(row)
                skipped.append((f"{where(part)}[{row}]", reason))
            for start in range(0, len(fine), rows_per_unit):
                stop = min(start + rows_per_unit, len(fine))
                skip = tuple(sorted(r for r in bad_rows if start <= r < stop))
                payload = (
                    kind,
                    str(path),
                    part,
                    start,
                    stop,
                    fine[start:stop].astype(np.int16).tobytes(),
                    skip,
                    tuple(fine_names),
                )
                units.append(WorkUnit(f"{part}-{start:05d}", payload, stop - start - len(skip)))
        splits = fraction_splits(fine_names, self.config)
        order = {Split.TRAIN: 0, Split.VALID: 1, Split.TEST: 2, None: 3}
        ranked = sorted(range(NUM_FINE), key=lambda f: (order[splits[fine_names[f]]], f))
        return ConversionPlan(
            source=self.name,
            dataset_name="cifar100",
            classes=[
                ClassInfo(fine_names[f], splits[fine_names[f]], coarse_names[superclass[f]])
                for f in ranked
            ],
            units=units,
            image_options=self.image_options(),
            superclass_names=coarse_names,
            skipped=skipped,
            provenance={
                "input": str(input_path.resolve()),
                "read_from": f"{kind}:{path.name}",
                "parts": list(PARTS),
                "fine_label_ids": {fine_names[f]: f for f in range(NUM_FINE)},
                "split_rule": fraction_rule(self.config),
            },
        )

    def read_unit(self, unit: WorkUnit) -> Iterator[RawItem]:
        kind, path, part, start, stop, fine_bytes, skip, names = unit.payload
        fine = np.frombuffer(fine_bytes, dtype=np.int16)
        data = _load_part(kind, path, part)["data"]
        where = describe(path, f"{ROOT}/{part}") if kind == "tar" else join(path, part)
        skip = set(skip)
        for row in range(start, stop):
            if row in skip:
                continue  # listed by the plan as a rejected row
            pixels = data[row].reshape(3, SIDE, SIDE).transpose(1, 2, 0).copy()
            yield RawItem(
                names[int(fine[row - start])], f"{part}-{row:05d}", f"{where}[{row}]", array=pixels
            )
