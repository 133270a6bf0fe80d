"""TFRecord framing, the pure-Python Example codec and the index, checked against TensorFlow."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from episodes.records.example_proto import (
    decode_example,
    decode_image_example,
    encode_example,
    encode_image_example,
)
from episodes.records.record_index import (
    RecordIndex,
    RecordIndexError,
    build_index,
    index_path_for,
    load_or_build_index,
    read_index,
    write_index,
)
from episodes.records.record_reader import FileHandlePool, RecordReader
from episodes.records.tfrecord_io import (
    CorruptRecordError,
    frame_record,
    iter_records,
    masked_crc32c,
    unframe_record,
    write_records,
)


def _payloads(n: int, seed: int = 0, label: int = 0) -> list[bytes]:
    """n image records of class `label` (the reader checks a class file's first label)."""
    rng = np.random.default_rng(seed)
    return [encode_image_example(rng.bytes(int(rng.integers(0, 3000))), label) for _ in range(n)]


def test_masked_crc_matches_tensorflow_writer(tmp_path):
    import tensorflow as tf

    payloads = _payloads(20)
    ours = tmp_path / "ours.tfrecords"
    theirs = tmp_path / "theirs.tfrecords"
    write_records(str(ours), payloads)
    with tf.io.TFRecordWriter(str(theirs)) as writer:
        for p in payloads:
            writer.write(p)
    assert ours.read_bytes() == theirs.read_bytes()
    assert masked_crc32c(b"") == 0xA282EAD8  # CRC of nothing is 0; masking adds the delta


def test_example_codec_round_trips_and_equals_tensorflow():
    import tensorflow as tf

    features = {"image": b"\x00\xffabc", "label": [-3, 2**40], "weights": [0.5, -1.25]}
    ours = encode_example(features)
    example = tf.train.Example(
        features=tf.train.Features(
            feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"\x00\xffabc"])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[-3, 2**40])),
                "weights": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5, -1.25])),
            }
        )
    )
    assert decode_example(example.SerializeToString()) == {
        "image": [b"\x00\xffabc"],
        "label": [-3, 2**40],
        "weights": [0.5, -1.25],
    }
    assert decode_example(ours) == decode_example(example.SerializeToString())
    parsed = tf.train.Example.FromString(ours)
    assert list(parsed.features.feature["label"].int64_list.value) == [-3, 2**40]
    assert decode_image_example(encode_image_example(b"img", 12)) == (b"img", 12)


def test_reader_bytes_equal_tf_data(tmp_path):
    import tensorflow as tf

    payloads = _payloads(37, seed=1, label=5)
    path = tmp_path / "5.tfrecords"
    offsets = write_records(str(path), payloads)
    index = build_index(path)
    assert [int(o) for o in index.offsets] == offsets
    write_index(index, index_path_for(path))
    reader = RecordReader(tmp_path)
    tf_records = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    ours = [reader.read_payload(5, k) for k in range(reader.num_records(5))]
    assert ours == tf_records == payloads
    # Random access in any order gives the same bytes (one seek per record).
    for k in np.random.default_rng(0).permutation(len(payloads)):
        assert reader.read_payload(5, int(k)) == payloads[k]


def test_corrupt_record_names_file_class_and_record(tmp_path):
    payloads = _payloads(5, seed=2, label=3)
    path = tmp_path / "3.tfrecords"
    offsets = write_records(str(path), payloads)
    write_index(build_index(path), index_path_for(path))
    data = bytearray(path.read_bytes())
    data[offsets[2] + 20] ^= 0xFF  # flip a payload byte of record 2
    path.write_bytes(bytes(data))
    reader = RecordReader(tmp_path)
    assert reader.read_payload(3, 1) == payloads[1]
    with pytest.raises(
        CorruptRecordError, match=r"3\.tfrecords, class 3, record 2: payload CRC mismatch"
    ):
        reader.read_payload(3, 2)
    with pytest.raises(CorruptRecordError, match="record 2"):
        list(iter_records(str(path)))


def test_unframe_rejects_truncation_and_bad_length():
    frame = frame_record(b"hello")
    assert unframe_record(frame) == b"hello"
    with pytest.raises(CorruptRecordError, match="truncated"):
        unframe_record(frame[:10])
    with pytest.raises(CorruptRecordError, match="length CRC"):
        unframe_record(b"\x01" + frame[1:])


def test_index_round_trip_and_stale_detection(tmp_path):
    path = tmp_path / "0.tfrecords"
    write_records(str(path), _payloads(4))
    index = build_index(path)
    assert RecordIndex.from_bytes(index.to_bytes()).offsets.tolist() == index.offsets.tolist()
    write_index(index, index_path_for(path))
    assert len(read_index(index_path_for(path), path)) == 4
    with open(path, "ab") as out:
        out.write(frame_record(b"extra"))
    with pytest.raises(RecordIndexError, match="stale index"):
        read_index(index_path_for(path), path)
    with pytest.raises(RecordIndexError, match="bad magic"):
        RecordIndex.from_bytes(b"NOTANIDX" + bytes(16))
    with pytest.raises(RecordIndexError, match="not found"):
        read_index(tmp_path / "missing.index")


def _writable(folder) -> bool:
    try:
        (folder / ".probe").write_bytes(b"")
    except OSError:
        return False
    (folder / ".probe").unlink()
    return True


def make_read_only(folder) -> None:
    """chmod for ordinary users; root ignores modes, so use the immutable attribute there."""
    os.chmod(folder, 0o555)
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(folder)], check=True)


def undo_read_only(folder) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    os.chmod(folder, 0o755)


def test_index_built_on_first_use_in_cache_when_folder_read_only(tmp_path):
    data_dir = tmp_path / "reference_dataset"
    data_dir.mkdir()
    write_records(str(data_dir / "0.tfrecords"), _payloads(6))
    make_read_only(data_dir)
    try:
        assert not _writable(data_dir)
        index = load_or_build_index(data_dir / "0.tfrecords", cache_dir=tmp_path / "cache")
        assert len(index) == 6
        assert not (data_dir / "0.index").exists()
        assert list((tmp_path / "cache").rglob("0.index"))
    finally:
        undo_read_only(data_dir)


def test_index_built_beside_records_when_missing(tmp_path):
    write_records(str(tmp_path / "2.tfrecords"), _payloads(3, label=2))
    reader = RecordReader(tmp_path)
    assert reader.num_records(2) == 3
    assert (tmp_path / "2.index").exists()


def test_file_handle_pool_is_bounded(tmp_path):
    for c in range(12):
        write_records(str(tmp_path / f"{c}.tfrecords"), _payloads(2, seed=c, label=c))
    reader = RecordReader(tmp_path, max_open_files=4)
    for c in range(12):
        reader.read_example(c, 1)
        assert reader.open_files <= 4
    reader.close()
    assert reader.open_files == 0
    with pytest.raises(ValueError, match="capacity"):
        FileHandlePool(0)
