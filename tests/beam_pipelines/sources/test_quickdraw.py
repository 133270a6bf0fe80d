"""Quick Draw conversion: one class per .npy, row chunks, --quickdraw-max-per-class, a
truncated file reported, the reference's pixels by default, lossless with
--pixel-convention original."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

from beam_pipelines.sources._lib.source_config import ConfigError
from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.quickdraw import QuickDrawSource
from episodes.records.record_reader import RecordReader
from tests.fixtures.meta_dataset_checks import convert_source
from tests.fixtures.raw.quickdraw import write_quickdraw_fixture
from tests.fixtures.source_test_case import SourceTestCase


class TestQuickDraw(SourceTestCase):
    SOURCE = QuickDrawSource
    FIXTURE = write_quickdraw_fixture
    CLASSES_PER_SPLIT = (241, 52, 52)
    REJECTED = 1  # the truncated .npy
    IMAGE_FORMAT = "jpeg"
    SPEC_KEYS = ("empty_classes", "pixel_convention")
    REFERENCE_SPEC = "quickdraw"

    def test_named_class_empty_class_and_truncated_file(self, converted):
        fixture, _, _ = converted
        spec = converted.spec
        assert "police car" in spec.class_names
        assert spec.provenance["empty_classes"] == [spec.class_id(fixture.classes[0])]
        assert "truncated" in spec.provenance["rejected"][0]["reason"]

    def test_pixels_are_the_reference_converters_by_default(self, converted):
        """Each row as the reference stores it: a 28x28 image converted to RGB, PIL-default
        JPEG."""
        fixture, out, report = converted
        class_id = report.spec.class_id("police car")
        rows = np.load(fixture.root / "police car.npy")
        reader = RecordReader(out)
        for k in range(rows.shape[0]):
            stored = reader.read_example(class_id, k)[0]
            expected = io.BytesIO()
            Image.fromarray(rows[k].reshape(28, 28)).convert("RGB").save(expected, format="JPEG")
            assert stored == expected.getvalue()
        assert report.spec.image_format == "jpeg"
        assert report.spec.provenance["pixel_convention"] == "meta-dataset"


def test_original_pixel_convention_stores_losslessly(tmp_path):
    fixture = write_quickdraw_fixture(tmp_path / "raw", classes=["cat", "dog", "police car"])
    report = convert_source(
        QuickDrawSource,
        fixture.root,
        tmp_path / "out",
        pixel_convention="original",
        random_split=True,
    )
    class_id = report.spec.class_id("police car")
    rows = np.load(fixture.root / "police car.npy")
    reader = RecordReader(tmp_path / "out")
    for k in range(rows.shape[0]):
        image = Image.open(io.BytesIO(reader.read_example(class_id, k)[0]))
        assert image.mode == "L" and image.format == "PNG"
        assert np.array_equal(np.asarray(image), rows[k].reshape(28, 28))


def test_chunks_and_max_per_class(tmp_path):
    names = ["cat", "dog"]
    fixture = write_quickdraw_fixture(tmp_path / "raw", classes=names, images_per_class=7)
    np.save(fixture.root / "cat.npy", np.zeros((7, 784), dtype=np.uint8))  # repair the cut file
    split_file = tmp_path / "split.json"  # two classes cannot fill three random splits
    split_file.write_text(json.dumps({"train": names, "valid": [], "test": []}))
    options = dict(
        split_file=str(split_file),
        quickdraw_max_per_class=5,
        quickdraw_chunk_rows=2,
        pixel_convention="original",  # lossless, to compare rows
    )
    plan = QuickDrawSource(**options).plan(fixture.root)
    assert plan.expected_items == 10 and len(plan.units) == 6
    report = convert_source(QuickDrawSource, fixture.root, tmp_path / "out", **options)
    assert report.spec.images_per_class == [5, 5]
    reader = RecordReader(tmp_path / "out")
    dog = np.load(fixture.root / "dog.npy")
    dog_id = report.spec.class_id("dog")
    for k in range(5):  # records keep the row order across chunks
        image = np.asarray(Image.open(io.BytesIO(reader.read_example(dog_id, k)[0])))
        assert np.array_equal(image, dog[k].reshape(28, 28))


def test_bad_layouts(tmp_path):
    with pytest.raises(LayoutError, match="no <category>.npy files"):
        QuickDrawSource().plan(tmp_path)
    fixture = write_quickdraw_fixture(tmp_path / "raw", classes=["cat"])
    with pytest.raises(ConfigError, match="--quickdraw-max-per-class 0: expected an integer >= 1"):
        QuickDrawSource(random_split=True, quickdraw_max_per_class=0)
    with pytest.raises(LayoutError, match="'hedgehog' of the split list"):
        QuickDrawSource().plan(fixture.root)
