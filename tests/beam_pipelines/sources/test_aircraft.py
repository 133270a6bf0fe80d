"""FGVC-Aircraft conversion: published split and class ids, box crops, rejects, bad layouts."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from beam_pipelines.sources.aircraft import AircraftSource, read_box_file
from beam_pipelines.sources.base import LayoutError
from episodes.records.dataset_spec import load_spec
from episodes.records.record_reader import RecordReader
from tests.fixtures.meta_dataset_checks import convert_source
from tests.fixtures.raw.aircraft import write_aircraft_fixture
from tests.fixtures.source_test_case import SourceTestCase


class TestAircraft(SourceTestCase):
    SOURCE = AircraftSource
    FIXTURE = write_aircraft_fixture
    CLASSES_PER_SPLIT = (70, 15, 15)
    REJECTED = 2  # an undecodable image and an image without a bounding box
    REFERENCE_SPEC = "aircraft"

    def test_names_and_reasons(self, converted):
        fixture, _, _ = converted
        spec = converted.spec
        assert spec.class_names[3] == "F-16A/B"  # variant names with spaces and slashes kept
        reasons = {r["path"].rsplit("/", 1)[-1]: r["reason"] for r in spec.provenance["rejected"]}
        assert "no bounding box" in reasons[fixture.corrupt[1].rsplit("/", 1)[-1]]
        assert "not a decodable image" in reasons[fixture.corrupt[0].rsplit("/", 1)[-1]]

    def test_every_record_is_its_box_crop(self, converted):
        fixture, out, _ = converted
        boxes = read_box_file(fixture.root / "data" / "images_box.txt")
        variants = {}
        for part in ("train", "val", "test"):
            lines = (fixture.root / "data" / f"images_variant_{part}.txt").read_text()
            for line in lines.splitlines():
                image_id, variant = line.split(" ", 1)
                variants.setdefault(variant, []).append(image_id)
        spec = load_spec(out)
        reader = RecordReader(out)
        for class_id in (0, 3, 99):
            ids = sorted(i for i in variants[spec.class_names[class_id]] if i in boxes)
            decodable = [i for i in ids if f"data/images/{i}.jpg" not in fixture.corrupt]
            for k, image_id in enumerate(decodable):
                left, top, right, bottom = boxes[image_id]
                image = Image.open(io.BytesIO(reader.read_example(class_id, k)[0]))
                assert image.size == (right - left, bottom - top)


def test_split_file_override_on_a_reduced_fixture(tmp_path):
    names = ["A318", "747-400", "Cessna 172"]
    fixture = write_aircraft_fixture(tmp_path / "raw", classes=names, images_per_class=2)
    split = tmp_path / "mine.json"
    split.write_text(
        '{"dataset": "aircraft", "train": ["Cessna 172"], "valid": ["A318"], "test": ["747-400"]}'
    )
    report = convert_source(AircraftSource, fixture.root, tmp_path / "out", split_file=str(split))
    assert report.spec.class_names == ["Cessna 172", "A318", "747-400"]
    assert report.spec.images_per_class == [2, 2, 2]
    assert report.spec.provenance["split_origin"].startswith("file:")
    with pytest.raises(
        LayoutError, match="'A340-300' of the split list .* is missing from the data"
    ):
        AircraftSource().plan(fixture.root)


def test_bad_layouts(tmp_path):
    source = AircraftSource()
    with pytest.raises(LayoutError, match="not found"):
        source.plan(tmp_path / "missing")
    (tmp_path / "CUB_200_2011" / "images").mkdir(parents=True)
    with pytest.raises(LayoutError, match="not an FGVC-Aircraft layout: no data/images_box.txt"):
        source.plan(tmp_path / "CUB_200_2011")
    fixture = write_aircraft_fixture(tmp_path / "raw", classes=["A318"])
    (fixture.root / "data" / "images_variant_test.txt").unlink()
    with pytest.raises(LayoutError, match="images_variant_test.txt"):
        source.plan(fixture.root)
