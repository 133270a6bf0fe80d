"""Fungi conversion: train.json + val.json pooled, `NNNN.name` classes, all 1,394 classes."""

from __future__ import annotations

import json

import pytest

from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.fungi import FungiSource, category_class_name
from tests.meta_dataset_checks import check_matches_reference, convert_source, reference_spec
from tests.raw_fixtures.fungi import write_fungi_fixture


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    fixture = write_fungi_fixture(tmp_path_factory.mktemp("raw"))
    out = tmp_path_factory.mktemp("out") / "fungi"
    return fixture, out, convert_source(FungiSource, fixture.root, out)


def test_published_split_gives_the_reference_classes(converted, reference_data):
    fixture, out, report = converted
    spec = check_matches_reference(out, reference_spec(reference_data, "fungi"), fixture)
    assert [len(spec.classes(s)) for s in ("train", "valid", "test")] == [994, 200, 200]
    assert spec.class_names[0] == "0226.Cortinarius malicorius"
    rejected = {r["path"]: r["reason"] for r in spec.provenance["rejected"]}
    assert rejected[str(fixture.root / fixture.skipped[0])] == "image without an annotation"


def test_class_names_and_pooled_parts(converted):
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
