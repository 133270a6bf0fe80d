"""MSCOCO conversion: one example per instance, crops of the box enlarged by 1.2 as the
reference, crowd annotations kept (or left out on request), bad boxes and images rejected."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from beam_pipelines.sources._lib.source_config import ConfigError
from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.mscoco import MSCOCOSource, enlarged_box
from episodes.records.record_reader import RecordReader
from tests.fixtures.raw.mscoco import HEIGHT, WIDTH, write_mscoco_fixture
from tests.fixtures.source_test_case import SourceTestCase


class TestMscoco(SourceTestCase):
    SOURCE = MSCOCOSource
    FIXTURE = write_mscoco_fixture
    CLASSES_PER_SPLIT = (0, 40, 40)
    REJECTED = 2  # the box outside its image and the truncated image
    SPEC_KEYS = ("box_scale_ratio",)
    REFERENCE_SPEC = "mscoco"

    def test_first_classes_empty_crop_and_ratio(self, converted):
        spec = converted.spec
        assert spec.class_names[:3] == ["person", "motorcycle", "train"]
        reasons = [r["reason"] for r in spec.provenance["rejected"]]
        assert any("crop box" in r and "is empty" in r for r in reasons)
        assert spec.provenance["box_scale_ratio"] == 1.2

    def test_records_are_the_enlarged_crops(self, converted):
        fixture, out, report = converted
        raw = json.loads((fixture.root / "annotations" / "instances_train2017.json").read_text())
        names = {c["id"]: c["name"] for c in raw["categories"]}
        reader = RecordReader(out)
        for class_name in ("person", "dog", "toothbrush"):
            class_id = report.spec.class_id(class_name)
            annotations = sorted(
                (a for a in raw["annotations"] if names[a["category_id"]] == class_name),
                key=lambda a: (a["image_id"], a["id"]),
            )
            sizes = []
            for a in annotations:
                left, top, right, bottom = enlarged_box(a["bbox"], 1.2)
                sizes.append((min(right, WIDTH) - max(left, 0), min(bottom, HEIGHT) - max(top, 0)))
            decoded = [
                Image.open(io.BytesIO(reader.read_example(class_id, k)[0])).size
                for k in range(reader.num_records(class_id))
            ]
            assert decoded == [s for s in sizes if s[0] > 0 and s[1] > 0][: len(decoded)]
            assert len(decoded) == fixture.images_per_class[class_name]


def test_enlarged_box_formula():
    # a 10 x 20 box at (4.5, 2.5) grows by 1 and 2 pixels on each side; far edges inclusive
    assert enlarged_box([4.5, 2.5, 10.0, 20.0], 1.2) == (3, 0, 16, 25)
    assert enlarged_box([4.5, 2.5, 10.0, 20.0], 1.0) == (4, 2, 15, 23)
    left, top, right, bottom = enlarged_box([100.0, 50.0, 40.0, 30.0], 1.5)
    assert (right - left, bottom - top) == (61, 46)  # 1.5x the size, +1 inclusive pixel


def test_exclude_crowd_and_bad_layouts(tmp_path):
    fixture = write_mscoco_fixture(tmp_path / "raw")
    crowd = fixture.details["crowd_class"]
    default = MSCOCOSource().plan(fixture.root)
    strict = MSCOCOSource(mscoco_exclude_crowd=True).plan(fixture.root)
    assert default.expected_items - strict.expected_items == 1
    assert strict.provenance["crowd_annotations_left_out"] == 1 and crowd
    with pytest.raises(ConfigError, match="--mscoco-box-scale-ratio 0.5: expected a number >= 1"):
        MSCOCOSource(mscoco_box_scale_ratio=0.5)
    with pytest.raises(LayoutError, match="not an MSCOCO train2017 layout"):
        MSCOCOSource().plan(fixture.root / "train2017")
    path = fixture.root / "annotations" / "instances_train2017.json"
    raw = json.loads(path.read_text())
    raw["categories"] = [c for c in raw["categories"] if c["name"] != "zebra"]
    raw["annotations"] = [
        a for a in raw["annotations"] if a["category_id"] in {c["id"] for c in raw["categories"]}
    ]
    path.write_text(json.dumps(raw))
    with pytest.raises(LayoutError, match="'zebra' of the split list"):
        MSCOCOSource().plan(fixture.root)
