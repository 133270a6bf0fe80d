"""Traffic Signs (GTSRB) conversion: label-list names, all classes test, CSV check, PPM input,
2 workers give the same bytes as 1."""

from __future__ import annotations

import pytest

from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.traffic_sign import TrafficSignSource
from tests.fixtures.raw.traffic_sign import write_traffic_sign_fixture
from tests.fixtures.source_test_case import SourceTestCase


class TestTrafficSign(SourceTestCase):
    SOURCE = TrafficSignSource
    FIXTURE = write_traffic_sign_fixture
    CLASSES_PER_SPLIT = (0, 0, 43)
    REJECTED = 1  # the truncated image
    REFERENCE_SPEC = "traffic_sign"
    RERUN_WORKERS = 2  # 2 workers give the same bytes as 1

    def test_first_class_and_annotation_files(self, converted):
        spec = converted.spec
        assert spec.class_names[0] == "00.Speed limit (20km/h)"
        # the per-class GT-000NN.csv is an annotation file, neither converted nor rejected
        assert not any(r["path"].endswith(".csv") for r in spec.provenance["rejected"])


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
