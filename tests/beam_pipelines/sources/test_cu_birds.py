"""CUB-200-2011 conversion: species folders as classes, published split, full images."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.cu_birds import CUBirdsSource
from episodes.records.record_reader import RecordReader
from tests.fixtures.raw.cu_birds import write_cu_birds_fixture
from tests.fixtures.source_test_case import SourceTestCase


class TestCuBirds(SourceTestCase):
    SOURCE = CUBirdsSource
    FIXTURE = write_cu_birds_fixture
    CLASSES_PER_SPLIT = (140, 30, 30)
    IMAGES_PER_CLASS = 1
    REJECTED = 1  # the truncated image
    REFERENCE_SPEC = "cu_birds"

    def test_first_class_and_full_images_are_kept(self, converted):
        _, out, _ = converted
        assert converted.spec.class_names[0] == "190.Red_cockaded_Woodpecker"
        image = Image.open(io.BytesIO(RecordReader(out).read_example(5, 0)[0]))
        assert image.size == (16, 12) and image.mode == "RGB"


def test_wrapper_folder_and_bad_layouts(tmp_path):
    names = ["001.Black_footed_Albatross", "002.Laysan_Albatross", "003.Sooty_Albatross"]
    fixture = write_cu_birds_fixture(tmp_path / "raw", classes=names)  # one per random split
    source = CUBirdsSource(random_split=True)
    plan = source.plan(fixture.root.parent)  # the folder the archive was extracted into
    assert sorted(c.name for c in plan.classes) == names
    with pytest.raises(LayoutError, match="not a CUB-200-2011 layout"):
        source.plan(tmp_path)
    with pytest.raises(LayoutError, match="'190.Red_cockaded_Woodpecker' of the split list"):
        CUBirdsSource().plan(fixture.root)
