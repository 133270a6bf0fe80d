"""`.npy` headers are parsed one thread at a time (CPython 3.11's AST constructor is not safe
to run from two threads at once; numpy parses headers with `ast.literal_eval`)."""

from __future__ import annotations

import ast
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from episodes.util import npy_maps


class _OverlapMeter:
    """Stands in for `ast.literal_eval` (numpy's header parser); counts overlapping calls."""

    def __init__(self, inner):
        self.inner = inner
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.calls = 0

    def __call__(self, text):
        with self.lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.002)  # widen the window a second thread would have to enter
            return self.inner(text)
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture
def arrays(tmp_path):
    paths = []
    for k in range(6):
        path = tmp_path / f"{k}.npy"
        np.save(path, np.full((k + 1, 4, 4, 3), k, dtype=np.uint8))
        paths.append(path)
    return paths


@pytest.mark.parametrize("opener", ["open_npy_map", "npy_header"])
def test_headers_are_never_parsed_by_two_threads_at_once(monkeypatch, arrays, opener):
    meter = _OverlapMeter(ast.literal_eval)
    monkeypatch.setattr(ast, "literal_eval", meter)
    open_one = getattr(npy_maps, opener)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(open_one, arrays * 8))
    assert meter.calls == len(arrays) * 8  # the meter really sat on numpy's header path
    assert meter.most == 1
    if opener == "open_npy_map":
        for k, arr in enumerate(results[: len(arrays)]):
            assert arr.shape == (k + 1, 4, 4, 3) and int(arr[0, 0, 0, 0]) == k
            assert not arr.flags.writeable
    else:
        for k, (shape, fortran, dtype, offset) in enumerate(results[: len(arrays)]):
            assert shape == (k + 1, 4, 4, 3) and not fortran and dtype == np.uint8
            assert arrays[k].stat().st_size == offset + (k + 1) * 48


def test_without_the_lock_the_meter_sees_overlap(monkeypatch, arrays):
    """The meter can fail: plain `np.load` from eight threads does overlap header parses."""
    meter = _OverlapMeter(ast.literal_eval)
    monkeypatch.setattr(ast, "literal_eval", meter)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: np.load(p, mmap_mode="r"), arrays * 8))
    assert meter.most > 1


def test_npy_header_refuses_a_file_that_is_not_npy(tmp_path):
    path = tmp_path / "plain.npy"
    path.write_bytes(b"not an array at all")
    with pytest.raises(ValueError):
        npy_maps.npy_header(path)
