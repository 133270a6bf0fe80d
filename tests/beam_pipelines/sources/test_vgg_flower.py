"""VGG Flower conversion: imagelabels.mat labels, `NNN.name` classes, published split."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.io import loadmat, savemat

from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.vgg_flower import VggFlowerSource
from tests.fixtures.raw.vgg_flower import write_vgg_flower_fixture
from tests.fixtures.source_test_case import SourceTestCase


class TestVggFlower(SourceTestCase):
    SOURCE = VggFlowerSource
    FIXTURE = write_vgg_flower_fixture
    CLASSES_PER_SPLIT = (71, 15, 16)
    REJECTED = 1  # the truncated image
    REFERENCE_SPEC = "vgg_flower"

    def test_first_class(self, converted):
        assert converted.spec.class_names[0] == "090.canna lily"

    def test_images_go_to_the_class_of_their_label(self, converted):
        fixture, out, _ = converted
        labels = loadmat(str(fixture.root / "imagelabels.mat"))["labels"].reshape(-1).astype(int)
        plan = VggFlowerSource().plan(fixture.root)
        for unit in plan.units:
            class_name, entries = unit.payload
            for entry in entries:
                index = int(entry.key[len("image_") : -len(".jpg")])
                assert int(class_name[:3]) == labels[index - 1]


def test_bad_labels_and_layouts(tmp_path):
    names = ["001.pink primrose", "002.hard-leaved pocket orchid", "003.canterbury bells"]
    fixture = write_vgg_flower_fixture(tmp_path / "raw", classes=names)  # one per random split
    source = VggFlowerSource(random_split=True)
    assert sorted(c.name for c in source.plan(fixture.root).classes) == names
    savemat(str(fixture.root / "imagelabels.mat"), {"labels": np.array([[1, 103]], dtype=float)})
    with pytest.raises(LayoutError, match="label 103 outside 1..102"):
        source.plan(fixture.root)
    (fixture.root / "imagelabels.mat").write_bytes(b"not a mat file")
    with pytest.raises(LayoutError, match="not a MATLAB file"):
        source.plan(fixture.root)
    with pytest.raises(LayoutError, match="not a VGG Flower layout"):
        source.plan(tmp_path)
