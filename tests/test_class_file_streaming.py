"""The streaming class-file writer (records parked in spill files, references grouped): the same
bytes as the buffered writer it replaced, records ordered by item key then image hash."""

from __future__ import annotations

import hashlib
import random

import numpy as np

from beam_pipelines import writer
from beam_pipelines.conversion import convert
from beam_pipelines.frame_spill import SPILL_FOLDER, SpillWriter
from beam_pipelines.sources.omniglot import OmniglotSource
from benchmarks.class_file_memory import BufferedEncodeImagesFn, buffered_write_class_file
from episodes.records.example_proto import encode_image_example
from episodes.records.record_index import RecordIndex
from episodes.records.tfrecord_io import frame_record
from tests.conftest import make_local_runner
from tests.raw_fixtures.omniglot import write_omniglot_fixture


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


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
    result = writer.write_class_file((4, iter(refs)), str(out))  # a one-pass iterable
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
