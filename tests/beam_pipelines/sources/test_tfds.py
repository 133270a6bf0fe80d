"""The TFDS converter on a tiny dataset prepared here (no network): classes from the ClassLabel
feature, pooled splits, TFRecord and ArrayRecord shards, a corrupt record, never downloading."""

from __future__ import annotations

import io
import shutil
import struct

import numpy as np
import pytest
from PIL import Image

from beam_pipelines import convert as convert_cli
from beam_pipelines.conversion.pipeline import convert
from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.tfds_source import TfdsSource
from episodes.records.dataset_spec import load_spec
from episodes.records.record_reader import RecordReader

pytest.importorskip("tensorflow_datasets")

from tests.fixtures.meta_dataset_checks import digest  # noqa: E402
from tests.fixtures.raw.tfds import (  # noqa: E402 (needs tensorflow_datasets)
    LABELS,
    NAME,
    SPLIT_SIZES,
    expected_images,
    write_tfds_fixture,
)
from tests.fixtures.source_test_case import SourceTestCase  # noqa: E402


def _stored(out) -> dict[int, list[bytes]]:
    reader = RecordReader(out)
    spec = load_spec(out)
    stored = {}
    for class_id in range(spec.num_classes):
        images = []
        for k in range(reader.num_records(class_id)):
            image, label = reader.read_example(class_id, k)
            assert label == class_id
            images.append(np.asarray(Image.open(io.BytesIO(image))).tobytes())
        stored[class_id] = sorted(images)
    return stored


def _source(**options) -> TfdsSource:
    return TfdsSource(tfds_name=NAME, **options)


class TestTfds(SourceTestCase):
    SOURCE = TfdsSource
    FIXTURE = write_tfds_fixture
    OPTIONS = {"tfds_name": NAME}
    DATASET = NAME
    NUM_CLASSES = len(LABELS)
    TOTAL_IMAGES = sum(SPLIT_SIZES.values())
    IMAGE_FORMAT = "png"
    SPEC_KEYS = ("tfds_splits", "image_feature", "label_feature", "tfds_file_format")

    @pytest.fixture(scope="class")
    def data_dir(self, fixture):
        return fixture.root

    def test_converts_every_split_pooled_per_class(self, data_dir, tmp_path):
        out = tmp_path / "out"
        code = convert_cli.main(
            [
                "--source",
                f"tfds:{NAME}",
                "--input",
                str(tmp_path),
                "--tfds-data-dir",
                str(data_dir),
                "--output",
                str(out),
            ]
        )
        assert code == 0
        spec = load_spec(out)
        assert spec.name == NAME and spec.class_names == LABELS and not spec.has_splits
        expected = expected_images()
        assert spec.images_per_class == [len(expected[c]) for c in range(3)]
        assert sum(spec.images_per_class) == sum(SPLIT_SIZES.values())
        assert _stored(out) == expected  # PNG in, PNG out: identical pixels
        assert spec.image_format == "png" and spec.provenance["tfds_splits"] == ["test", "train"]
        assert (
            spec.provenance["image_feature"] == "image" and spec.provenance["rejected_count"] == 0
        )

    def test_one_split_and_array_record_shards(self, data_dir, tmp_path, local_runner):
        test_only = convert(
            _source(tfds_split="test"), data_dir, tmp_path / "test_only", local_runner(1)
        )
        assert test_only.spec.images_per_class == [
            len(v) for _, v in sorted(expected_images(["test"]).items())
        ]
        whole = convert(_source(), data_dir, tmp_path / "whole", local_runner(1))
        array_dir = tmp_path / "array_record"
        write_tfds_fixture(array_dir, "array_record")
        arrays = convert(
            _source(tfds_data_dir=str(array_dir)), tmp_path, tmp_path / "arrays", local_runner(1)
        )
        assert arrays.spec.provenance["tfds_file_format"] == "array_record"
        assert digest(arrays.output, spec=False) == digest(whole.output, spec=False)
        again = convert(_source(), data_dir, tmp_path / "again", local_runner(1))
        assert digest(again.output, spec=False) == digest(whole.output, spec=False)

    def test_corrupt_record_is_rejected_and_the_rest_converted(
        self, data_dir, tmp_path, local_runner
    ):
        copy = tmp_path / "copy"
        shutil.copytree(data_dir, copy)
        shard = next(copy.rglob(f"{NAME}-train.tfrecord-*"))
        data = bytearray(shard.read_bytes())
        (length,) = struct.unpack("<Q", data[:8])
        data[12 + length // 2] ^= 0xFF  # inside the first record's payload
        shard.write_bytes(bytes(data))
        report = convert(_source(), copy, tmp_path / "out", local_runner(1))
        rejected = report.spec.provenance["rejected"]
        assert len(rejected) == 1 and rejected[0]["path"] == f"{shard}[0]"
        assert "payload CRC mismatch" in rejected[0]["reason"]
        assert report.images == sum(SPLIT_SIZES.values()) - 1

    def test_unknown_split_and_feature_keys(self, data_dir):
        with pytest.raises(
            LayoutError, match=r"unknown split\(s\) \['validation'\]; .* has \['test', 'train'\]"
        ):
            _source(tfds_split="validation").plan(data_dir)
        with pytest.raises(
            LayoutError,
            match=r"top-level Image features \['image'\]; .*--tfds-image-key \(got 'id'\)",
        ):
            _source(tfds_image_key="id").plan(data_dir)


def test_never_downloads_and_names_what_is_missing(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(
        LayoutError, match=r"TFDS dataset 'mnist' is not prepared there .*never downloads"
    ):
        TfdsSource(tfds_name="mnist").plan(empty)
    assert not any(empty.iterdir())
    with pytest.raises(LayoutError, match="'no_such_dataset_xyz' not found there"):
        TfdsSource(tfds_name="no_such_dataset_xyz").plan(empty)
    with pytest.raises(LayoutError, match="expected tfds:NAME"):
        TfdsSource().plan(empty)
    with pytest.raises(LayoutError, match="not found"):
        _source().plan(tmp_path / "missing")
    with pytest.raises(SystemExit):
        convert_cli.main(["--source", "tfds:mnist", "--help"])
    assert "--tfds-data-dir" in capsys.readouterr().out
