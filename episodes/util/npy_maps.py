"""Open `.npy` files as read-only memory maps, safely from several threads at once.

numpy parses a `.npy` header with `ast.literal_eval`. CPython 3.11 keeps the AST constructor's
recursion depth in interpreter-wide state (the change of cpython gh-95185; see gh-106905), so two
threads parsing at the same moment can fail with "SystemError: AST constructor recursion depth
mismatch". The reader's gather threads open class arrays concurrently, so every header is read
here under one process-wide lock; reading the mapped rows needs no lock.
"""

from __future__ import annotations

import os
import threading

import numpy as np

__all__ = ["npy_header", "open_npy_map"]

_HEADER_LOCK = threading.Lock()


def open_npy_map(path: str | os.PathLike) -> np.memmap:
    """`np.load(path, mmap_mode="r", allow_pickle=False)`, with the header parsed under a lock."""
    with _HEADER_LOCK:
        return np.load(path, mmap_mode="r", allow_pickle=False)


def npy_header(path: str | os.PathLike) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran order, dtype, data offset) from the header of the `.npy` file at `path`,
    parsed under the same lock; ValueError if it is not a `.npy` file."""
    with open(path, "rb") as handle, _HEADER_LOCK:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
        return shape, fortran, dtype, handle.tell()
