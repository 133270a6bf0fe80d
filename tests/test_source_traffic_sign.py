"""Traffic Signs (GTSRB) conversion: label-list names, all classes test, CSV check, PPM input,
2 workers give the same bytes as 1."""

from __future__ import annotations

import pytest

from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.traffic_sign import TrafficSignSource
from tests.meta_dataset_checks import (
    check_matches_reference,
    convert_source,
    digest,
    reference_spec,
)
from tests.raw_fixtures.traffic_sign import write_traffic_sign_fixture


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    fixture = write_traffic_sign_fixture(tmp_path_factory.mktemp("raw"))
    out = tmp_path_factory.mktemp("out") / "traffic_sign"
    return fixture, out, convert_source(TrafficSignSource, fixture.root, out)


def test_published_split_gives_the_reference_classes(converted, reference_data):
    fixture, out, report = converted
    spec = check_matches_reference(out, reference_spec(reference_data, "traffic_sign"), fixture)
    assert [len(spec.classes(s)) for s in ("train", "valid", "test")] == [0, 0, 43]
    assert spec.class_names[0] == "00.Speed limit (20km/h)"
    # the per-class GT-000NN.csv is an annotation file, neither converted nor rejected
    assert not any(r["path"].endswith(".csv") for r in spec.provenance["rejected"])


def test_two_workers_give_the_same_bytes(converted, tmp_path):
    fixture, out, _ = converted
    two = convert_source(TrafficSignSource, fixture.root, tmp_path / "traffic_sign", workers=2)
    assert digest(two.output) == digest(out)


def test_random_split_keeps_every_class_for_test(tmp_path):
    fixture = write_traffic_sign_fixture(
        tmp_path / "raw", classes=["00.Speed limit (20km/h)", "14.Stop"]
    )
    plan = TrafficSignSource(random_split=True).plan(fixture.root)
    assert [(c.name, c.split.value) for c in plan.classes] == [
        ("00.Speed limit (20km/h)", "test"),
        ("14.Stop", "test"),
    ]


def test_bad_layouts(tmp_path):
    fixture = write_traffic_sign_fixture(tmp_path / "raw", classes=["14.Stop"])
    csv_path = fixture.root / "Final_Training" / "Images" / "00014" / "GT-00014.csv"
    good = csv_path.read_text()
    csv_path.write_text(good.replace(";14\n", ";15\n"))
    with pytest.raises(LayoutError, match="has ClassId 15 inside class folder 00014"):
        TrafficSignSource(random_split=True).plan(fixture.root)
    csv_path.write_text(good)
    (fixture.root / "Final_Training" / "Images" / "00043").mkdir()
    with pytest.raises(LayoutError, match="names only 43 classes"):
        TrafficSignSource(random_split=True).plan(fixture.root)
    with pytest.raises(LayoutError, match="not a GTSRB layout"):
        TrafficSignSource().plan(tmp_path)
