"""The streaming class-file writer (records parked in spill files, references grouped): the same
bytes as the buffered writer it replaced, records ordered by item key then image hash."""

from __future__ import annotations

import dataclasses
import hashlib
import random

import numpy as np
import pytest

from beam_pipelines.conversion import writer
from beam_pipelines.conversion.frame_spill import SPILL_FOLDER, SpillWriter
from beam_pipelines.conversion.pipeline import convert
from beam_pipelines.conversion.whole_class_file import WholeClassFile
from beam_pipelines.sources.omniglot import OmniglotSource
from benchmarks.class_file_memory import BufferedEncodeImagesFn, buffered_write_class_file
from episodes.records.example_proto import encode_image_example
from episodes.records.record_index import RecordIndex
from episodes.records.tfrecord_io import frame_record
from tests.fixtures.local_runner import make_local_runner
from tests.fixtures.raw.omniglot import write_omniglot_fixture


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.slow
def test_conversion_bytes_equal_the_buffered_writers(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    raw.mkdir()
    write_omniglot_fixture(raw)
    streamed = convert(
        OmniglotSource(),
        raw,
        tmp_path / "streamed",
        make_local_runner(2),
    )
    with monkeypatch.context() as patch:  # the writer as it was before streaming
        patch.setattr(writer, "EncodeImagesFn", BufferedEncodeImagesFn)
        patch.setattr(writer, "write_class_file", buffered_write_class_file)
        convert(OmniglotSource(), raw, tmp_path / "buffered", make_local_runner(1))
    assert _files(tmp_path / "streamed") == _files(tmp_path / "buffered")
    assert streamed.spec.total_images == 152
    assert SPILL_FOLDER not in _files(tmp_path / "streamed")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_records_ordered_by_key_then_image_hash_from_any_arrival_order(tmp_path):
    rng = random.Random(3)
    images = {
        f"k{i:03d}": bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        for i in range(60)
    }
    items = list(images.items()) + [
        ("k007", b"another image with a duplicate key"),
        ("k007", b"\x00dup"),
    ]
    staging = tmp_path / "staging"
    out = tmp_path / "out"
    out.mkdir()
    refs = []
    rng.shuffle(items)
    for bundle in range(3):  # three bundles, items arriving shuffled
        spill = SpillWriter(str(staging))
        for key, image in items[bundle * 21 : (bundle + 1) * 21]:
            frame = frame_record(encode_image_example(image, 4))
            refs.append(spill.add(4, key, hashlib.sha256(image).digest(), frame))
        spill.close()
    rng.shuffle(refs)
    batches = [refs[:30], refs[30:]]  # one batch of references per unit
    result = writer.write_class_file((4, iter(batches)), str(out))  # a one-pass iterable
    expected = sorted(items, key=lambda kv: (kv[0], hashlib.sha256(kv[1]).digest()))
    frames = [frame_record(encode_image_example(image, 4)) for _, image in expected]
    data = (out / "4.tfrecords").read_bytes()
    assert data == b"".join(frames)
    index = RecordIndex.from_bytes((out / "4.index").read_bytes())
    assert index.offsets.tolist() == np.cumsum([0] + [len(f) for f in frames[:-1]]).tolist()
    assert index.file_size == len(data)
    assert result == {
        "class_id": 4,
        "images": 62,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "duplicate_keys": 2,
    }
    assert not list((staging / SPILL_FOLDER).iterdir())  # local spill files freed once written


@pytest.mark.parametrize("arrival", ["in order", "shuffled"])
def test_whole_class_file_equals_the_grouped_writer(tmp_path, arrival):
    """A unit holding a whole class writes its file while read: the same bytes, index and
    result as the spill + GroupByKey writer, whether the records arrive in order or not."""
    rng = random.Random(5)
    items = [(f"k{i:03d}", rng.randbytes(rng.randrange(1, 300))) for i in range(40)]
    items += [("k010", b"a duplicate key"), ("k010", b"\x00another")]
    items += [("k020", rng.randbytes(70_000)), ("k030", rng.randbytes(90_000))]  # framed in pieces
    items.sort(key=lambda kv: (kv[0], hashlib.sha256(kv[1]).digest()))
    if arrival == "shuffled":
        rng.shuffle(items)
    grouped, direct, staging = tmp_path / "grouped", tmp_path / "direct", tmp_path / "staging"
    grouped.mkdir()
    spill = SpillWriter(str(staging))
    out = WholeClassFile(7, str(direct))
    refs = []
    for key, image in items:
        frame = frame_record(encode_image_example(image, 7))
        refs.append(spill.add(7, key, hashlib.sha256(image).digest(), frame))
        out.add(key, image, [frame[:5], frame[5:]])  # a frame in pieces
    spill.close()
    expected = writer.write_class_file((7, [refs]), str(grouped))
    assert out.close() == expected
    assert _files(direct) == _files(grouped)
    assert sorted(_files(direct)) == ["7.index", "7.tfrecords"]  # no leftover of the rewrite


def test_a_whole_class_unit_yielding_another_class_fails_loudly(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    write_omniglot_fixture(raw)
    source = OmniglotSource()
    plan = source.plan(raw)
    unit = plan.units[0]
    wrong = dataclasses.replace(unit, whole_class=plan.units[1].whole_class)
    encoder = writer.EncodeImagesFn(source, plan.class_index(), plan.image_options, str(tmp_path))
    encoder.setup()
    encoder.start_bundle()
    with pytest.raises(RuntimeError, match="yielded an item of class"):
        list(encoder.process(wrong))


def test_plan_refuses_a_class_claimed_whole_by_two_units(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    write_omniglot_fixture(raw)
    plan = OmniglotSource().plan(raw)
    twice = plan.units + [dataclasses.replace(plan.units[0], key="again")]
    with pytest.raises(ValueError, match="whole-class units"):
        dataclasses.replace(plan, units=twice)
