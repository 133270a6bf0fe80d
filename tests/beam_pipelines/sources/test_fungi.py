"""Fungi conversion: train.json + val.json pooled, `NNNN.name` classes, all 1,394 classes."""

from __future__ import annotations

import json

import pytest

from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.fungi import FungiSource, category_class_name
from tests.fixtures.raw.fungi import write_fungi_fixture
from tests.fixtures.source_test_case import SourceTestCase


class TestFungi(SourceTestCase):
    SOURCE = FungiSource
    FIXTURE = write_fungi_fixture
    CLASSES_PER_SPLIT = (994, 200, 200)
    REJECTED = 2  # the truncated image and the image without an annotation
    REFERENCE_SPEC = "fungi"

    def test_first_class_and_the_unannotated_image(self, converted):
        fixture, _, _ = converted
        spec = converted.spec
        assert spec.class_names[0] == "0226.Cortinarius malicorius"
        rejected = {r["path"]: r["reason"] for r in spec.provenance["rejected"]}
        assert rejected[str(fixture.root / fixture.skipped[0])] == "image without an annotation"

    def test_class_names_and_pooled_parts(self, converted):
        fixture, _, _ = converted
        assert category_class_name({"id": 30, "name": "Amanita crocea"}) == "0030.Amanita crocea"
        parts = [json.loads((fixture.root / p).read_text()) for p in ("train.json", "val.json")]
        assert all(p["annotations"] for p in parts)  # both parts contribute examples
        plan = FungiSource().plan(fixture.root)
        listed = {e.key for u in plan.units for e in u.payload[1]}
        annotated = {i["file_name"] for p in parts for i in p["images"]} - set(fixture.skipped)
        assert listed == annotated


def test_bad_layouts(tmp_path):
    names = ["0226.Cortinarius malicorius", "0030.Amanita crocea", "0003.Agaricus arvensis"]
    fixture = write_fungi_fixture(tmp_path / "raw", classes=names)
    source = FungiSource(random_split=True)
    assert sorted(c.name for c in source.plan(fixture.root).classes) == sorted(names)
    val = json.loads((fixture.root / "val.json").read_text())
    val["categories"] = val["categories"][:1]
    (fixture.root / "val.json").write_text(json.dumps(val))
    with pytest.raises(LayoutError, match="list different categories"):
        source.plan(fixture.root)
    (fixture.root / "val.json").unlink()
    with pytest.raises(LayoutError, match=r"missing \['val.json'\]"):
        source.plan(fixture.root)
