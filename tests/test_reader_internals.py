"""Pieces of the reader's fast path: batched payload reads, cache gathers, inline/pool choice."""

from __future__ import annotations

import numpy as np
import pytest

from episodes.dataset_spec import DatasetSpec, Split
from episodes.decoded_cache import DecodedCache, DecodedCacheError, cache_path, write_decoded_cache
from episodes.example_proto import encode_image_example
from episodes.image_decode import ParallelismGauge
from episodes.record_index import build_index, index_path_for, write_index
from episodes.record_reader import CorruptRecordError, RecordReader
from episodes.tfrecord_io import write_records


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
    spec = DatasetSpec("tiny", ["a", "b"], [6, 6], {Split.TRAIN: [0], Split.VALID: [], Split.TEST: [1]})
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


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def drive(gauge, clock, episodes, seconds_per_episode, drain=None):
    """Feed `episodes` episodes of 10 images; each lasts seconds_per_episode[mode] (plus
    `drain` seconds for the first one after a switch). Returns the decisions as P/I."""
    out = []
    for _ in range(episodes):
        mode = "pool" if gauge.use_pool(10) else "inline"
        if drain is not None and out and out[-1] != mode[0].upper():
            clock.now += drain
        out.append(mode[0].upper())
        clock.now += seconds_per_episode[mode]
    return "".join(out)


def test_gauge_probes_both_ways_then_keeps_the_faster_with_growing_backoff():
    clock = FakeClock()
    gauge = ParallelismGauge(workers=2, window=2, settle=1, backoff=4, clock=clock)
    gauge.enabled = True  # whatever this machine's free cores, test the decision rule
    decisions = drive(gauge, clock, 24, {"pool": 1.0, "inline": 0.1})
    # pool probe (1 settling + 2 counted), inline probe, inline for 4, pool probe loses,
    # inline for 8 (backoff doubled), ...
    assert decisions[:21] == "PPP" + "III" + "IIII" + "PPP" + "IIIIIIII"
    assert gauge.rates == {"pool": pytest.approx(10.0), "inline": pytest.approx(100.0)}
    assert gauge.backoff == 8


def test_gauge_keeps_the_pool_when_it_is_faster_and_ignores_settling_intervals():
    clock = FakeClock()
    gauge = ParallelismGauge(workers=2, window=3, settle=2, backoff=6, clock=clock)
    gauge.enabled = True
    # Every switch costs a 5 s stall in its first interval (a draining pipeline): not counted.
    decisions = drive(gauge, clock, 40, {"pool": 0.05, "inline": 0.1}, drain=5.0)
    assert gauge.rates == {"pool": pytest.approx(200.0), "inline": pytest.approx(100.0)}
    # probes of 2 settling + 3 counted; the losing inline probe doubles the pool's run (2 + 12)
    assert decisions[:29] == "PPPPP" + "IIIII" + "P" * 14 + "IIIII"
    assert gauge.backoff == 24 and decisions[29:] == "P" * 11


def test_gauge_needs_the_pool_to_win_by_its_margin():
    clock = FakeClock()
    gauge = ParallelismGauge(workers=2, window=2, settle=1, backoff=4, margin=1.1, clock=clock)
    gauge.enabled = True
    decisions = drive(gauge, clock, 10, {"pool": 0.095, "inline": 0.1})  # pool 5% faster
    assert decisions == "PPP" + "III" + "IIII"
    assert gauge.rates["pool"] == pytest.approx(gauge.rates["inline"] / 0.95)


def test_gauge_disabled_never_uses_the_pool():
    gauge = ParallelismGauge(workers=0)
    assert not gauge.enabled
    assert not any(gauge.use_pool(10) for _ in range(10))
