"""Quick Draw: the per-category `numpy_bitmap` files `<category>.npy`, each an N x 784 uint8
array (one 28 x 28 drawing a row).

Classes are the file names without `.npy` (e.g. `police car`). Work units are chunks of rows,
read from a memory map in the workers; `--quickdraw-max-per-class` keeps the first rows of
each file (the full data has ~50M drawings). Stored as the reference does (RGB JPEG of each
row, beam_pipelines.conversion.pixel_conventions); `--pixel-convention original` stores lossless
greyscale PNG.
A file whose header or size is not that of an N x side*side uint8/bool array is reported.
In object storage (an s3:// or gs:// --input) a unit reads its rows with one ranged read of
the object instead of a memory map.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from beam_pipelines.sources._lib.listed_split_source import LayoutScan, ListedSplitSource
from beam_pipelines.sources._lib.published_splits import ListedSplitConfig
from beam_pipelines.sources._lib.raw_downloads import TfdsRegistered
from beam_pipelines.sources._lib.source_config import option
from beam_pipelines.sources.base import LayoutError, RawItem, WorkUnit
from episodes.storage.paths import is_remote, open_binary
from episodes.util.npy_maps import npy_header, open_npy_map

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "NPY_HEADER_MAX_BYTES",
    "npy_layout",
    "npy_rows",
    "QuickDrawConfig",
    "QuickDrawSource",
    "read_npy_rows",
    "WRAPPERS",
]

WRAPPERS = ("numpy_bitmap", "full/numpy_bitmap")
DEFAULT_CHUNK_ROWS = 10_000
NPY_HEADER_MAX_BYTES = 10 + 65535  # magic, version, length, and a version 1.0 header at most


def npy_layout(path: str | Path) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran order, dtype, data offset) of a local `.npy` file or of an object (its
    first bytes copied to a temporary file for the header parser)."""
    if not is_remote(path):
        return npy_header(path)
    import tempfile

    with open_binary(str(path), buffer_bytes=NPY_HEADER_MAX_BYTES) as stream:
        head = stream.read(NPY_HEADER_MAX_BYTES)
    with tempfile.NamedTemporaryFile(prefix="fewshot-npy-", suffix=".npy") as local:
        local.write(head)
        local.flush()
        return npy_header(local.name)


def read_npy_rows(path: str, start: int, stop: int) -> np.ndarray:
    """Rows start..stop of the 2-D `.npy` file or object at `path` (an object: one ranged
    read of exactly those rows); ValueError if the file ends before them."""
    if not is_remote(path):
        return open_npy_map(path)[start:stop]
    shape, _, dtype, offset = npy_layout(path)
    row_bytes = int(shape[1]) * dtype.itemsize
    with open_binary(path, buffer_bytes=max((stop - start) * row_bytes, 1)) as stream:
        stream.seek(offset + start * row_bytes)
        data = stream.read((stop - start) * row_bytes)
    if len(data) != (stop - start) * row_bytes:
        raise ValueError(f"ends inside row {start + len(data) // row_bytes}")
    return np.frombuffer(data, dtype=dtype).reshape(stop - start, shape[1])


def npy_rows(path: Path) -> tuple[int, int]:
    """(rows, image side) of a Quick Draw .npy file, from its header; ValueError if the file is
    not an N x side^2 uint8/bool array or is shorter than its header says."""
    shape, fortran, dtype, offset = npy_layout(path)
    if len(shape) != 2 or fortran or dtype not in (np.dtype(np.uint8), np.dtype(bool)):
        raise ValueError(f"array of shape {shape}, dtype {dtype}; expected N x 784 uint8")
    side = math.isqrt(shape[1])
    if side * side != shape[1] or side == 0:
        raise ValueError(f"rows of {shape[1]} values are not square images")
    expected = offset + shape[0] * shape[1] * dtype.itemsize
    actual = path.stat().st_size
    if actual < expected:
        raise ValueError(f"truncated: {actual} bytes, header promises {expected}")
    return int(shape[0]), side


@dataclass(frozen=True)
class QuickDrawConfig(ListedSplitConfig):
    quickdraw_max_per_class: int | None = option(
        None,
        "convert at most this many drawings per category (the first rows; default all)",
        minimum=1,
    )
    quickdraw_chunk_rows: int = option(DEFAULT_CHUNK_ROWS, "rows per work unit", minimum=1)


class QuickDrawSource(ListedSplitSource):
    name = "quickdraw"
    layout = "numpy_bitmap/<category>.npy (N x 784 uint8 each)"
    default_image_format = "png"
    default_mode = "L"
    config_class = QuickDrawConfig
    # Every <category>.npy TFDS's quickdraw_bitmap/checksums.tsv registers (345 files).
    downloads = (TfdsRegistered("quickdraw_bitmap", "*.npy"),)

    def scan(self, input_path: Path) -> LayoutScan:
        root = next(
            (
                c
                for c in (input_path, *(input_path / w for w in WRAPPERS))
                if c.is_dir() and any(c.glob("*.npy"))
            ),
            None,
        )
        if root is None:
            raise LayoutError(
                f"{input_path}: no <category>.npy files here or in {'/, '.join(WRAPPERS)}/; "
                f"expected {self.layout}"
            )
        limit, chunk = self.config.quickdraw_max_per_class, self.config.quickdraw_chunk_rows
        units, names, rows_total = [], [], 0
        for path in sorted(root.glob("*.npy")):
            names.append(path.stem)
            try:
                rows, side = npy_rows(path)
            except (ValueError, OSError) as exc:
                units.append(WorkUnit(path.stem, (path.stem, str(path), 0, 0, 0, str(exc)), 1))
                continue
            rows = rows if limit is None else min(rows, limit)
            rows_total += rows
            for start in range(0, rows, chunk):
                stop = min(start + chunk, rows)
                key = f"{path.stem}#{start:09d}"
                units.append(
                    WorkUnit(key, (path.stem, str(path), start, stop, side, None), stop - start)
                )
        return LayoutScan(
            root,
            names,
            units,
            provenance={"max_per_class": limit, "rows_selected": rows_total},
        )

    def read_unit(self, unit: WorkUnit) -> Iterator[RawItem]:
        class_name, path, start, stop, side, error = unit.payload
        if error is not None:
            yield RawItem(class_name, "", path, error=f"unreadable .npy: {error}")
            return
        try:
            rows = read_npy_rows(path, start, stop)
        except (ValueError, OSError) as exc:
            yield RawItem(class_name, f"{start:09d}", path, error=f"unreadable .npy: {exc}")
            return
        for offset, row in enumerate(rows):
            image = np.asarray(row).reshape(side, side)
            if image.dtype == bool:
                image = image.astype(np.uint8) * 255
            index = start + offset
            yield RawItem(class_name, f"{index:09d}", f"{path}[{index}]", array=image)
