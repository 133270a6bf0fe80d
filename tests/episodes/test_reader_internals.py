"""Pieces of the reader's fast path: batched payload reads, cache gathers, inline/pool choice."""

from __future__ import annotations

import numpy as np
import pytest

from episodes.images.decoded_cache import (
    DecodedCache,
    DecodedCacheError,
    cache_path,
    write_decoded_cache,
)
from episodes.images.image_decode import ParallelismGauge
from episodes.records.dataset_spec import DatasetSpec, Split
from episodes.records.example_proto import encode_image_example
from episodes.records.record_index import build_index, index_path_for, write_index
from episodes.records.record_reader import CorruptRecordError, RecordReader
from episodes.records.tfrecord_io import write_records


def _png(value: int) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (value, 255 - value, 7)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
def tiny_dataset(tmp_path):
    for c in range(2):
        path = tmp_path / f"{c}.tfrecords"
        write_records(str(path), [encode_image_example(_png(10 * c + k), c) for k in range(6)])
        write_index(build_index(path), index_path_for(path))
    spec = DatasetSpec(
        "tiny", ["a", "b"], [6, 6], {Split.TRAIN: [0], Split.VALID: [], Split.TEST: [1]}
    )
    spec.save(tmp_path)
    spec.root = tmp_path
    return spec


def test_read_payloads_equal_single_reads_in_the_order_asked(tiny_dataset):
    reader = RecordReader(tiny_dataset.root)
    order = [5, 0, 3, 3, 1]
    assert reader.read_payloads(1, order) == [reader.read_payload(1, k) for k in order]
    with pytest.raises(IndexError, match="record 6 out of range"):
        reader.read_payloads(1, [0, 6])


def test_read_payloads_detect_corruption(tiny_dataset):
    path = tiny_dataset.root / "0.tfrecords"
    data = bytearray(path.read_bytes())
    data[-6] ^= 0xFF  # inside the last record's payload
    path.write_bytes(bytes(data))
    reader = RecordReader(tiny_dataset.root)
    assert len(reader.read_payloads(0, [0, 1])) == 2
    with pytest.raises(CorruptRecordError, match="class 0, record 5"):
        reader.read_payloads(0, [4, 5])


def test_gather_many_equals_per_class_gathers_and_checks_bounds(tiny_dataset):
    write_decoded_cache(tiny_dataset, 8)
    cache = DecodedCache(cache_path(tiny_dataset.root, 8), tiny_dataset, 8)
    out = np.zeros((5, 8, 8, 3), np.uint8)
    cache.gather_many([(0, [2, 0], 0), (1, [5, 1, 1], 2)], out)
    expected = np.zeros_like(out)
    cache.gather(0, [2, 0], expected[0:2])
    cache.gather(1, [5, 1, 1], expected[2:5])
    assert np.array_equal(out, expected)
    assert out[2, 0, 0, 0] == 15 and out[0, 0, 0, 0] == 2  # decoded pixel values of the records
    with pytest.raises(DecodedCacheError, match="class 1 has 6 images, record 6 asked"):
        cache.gather_many([(1, [6], 0)], out)


def drive(gauge, episodes, seconds_per_image):
    """Run `episodes` episodes of 10 images, reporting the timed ones; returns the decisions
    as letters: P/I for pool/inline, upper case when synchronous, '*' after a timed one."""
    out = []
    for _ in range(episodes):
        mode, synchronous, timed = gauge.next_episode()
        letter = mode[0].upper() if synchronous else mode[0]
        if timed:
            gauge.record(mode, 10, 10 * seconds_per_image[mode])
            letter += "*"
        out.append(letter)
    return " ".join(out)


def test_gauge_probes_both_ways_then_runs_the_faster_with_growing_backoff():
    gauge = ParallelismGauge(workers=2, window=2, settle=1, backoff=4)
    gauge.enabled = True  # whatever this machine's free cores, test the decision rule
    decisions = drive(gauge, 22, {"pool": 0.1, "inline": 0.01})
    probe = "P P* P* I* I*"  # pool synchronous (1 settling, 2 timed), then inline timed
    assert decisions == " ".join([probe, "i i i i", probe, "i i i i i i i i"])
    assert gauge.rates == {"pool": pytest.approx(10.0), "inline": pytest.approx(100.0)}
    assert gauge.winner == "inline" and gauge.backoff == 8


def test_gauge_runs_the_pool_pipelined_when_it_wins_by_its_margin():
    gauge = ParallelismGauge(workers=2, window=2, settle=1, backoff=3, margin=1.1)
    gauge.enabled = True
    decisions = drive(gauge, 8, {"pool": 0.005, "inline": 0.01})  # pool twice as fast
    assert decisions == "P P* P* I* I* p p p"
    assert gauge.winner == "pool"
    close = ParallelismGauge(workers=2, window=2, settle=1, backoff=3, margin=1.1)
    close.enabled = True
    decisions = drive(close, 8, {"pool": 0.0095, "inline": 0.01})  # pool only 5% faster
    assert decisions.endswith("i i i") and close.winner == "inline"
    assert close.rates["pool"] == pytest.approx(close.rates["inline"] / 0.95)


def test_gauge_disabled_never_uses_the_pool():
    gauge = ParallelismGauge(workers=0)
    assert not gauge.enabled
    assert all(gauge.next_episode() == ("inline", True, False) for _ in range(10))
