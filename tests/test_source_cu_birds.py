"""CUB-200-2011 conversion: species folders as classes, published split, full images."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.cu_birds import CUBirdsSource
from episodes.records.record_reader import RecordReader
from tests.meta_dataset_checks import check_matches_reference, convert_source, reference_spec
from tests.raw_fixtures.cu_birds import write_cu_birds_fixture


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    fixture = write_cu_birds_fixture(tmp_path_factory.mktemp("raw"))
    out = tmp_path_factory.mktemp("out") / "cu_birds"
    return fixture, out, convert_source(CUBirdsSource, fixture.root, out)


def test_published_split_gives_the_reference_classes(converted, reference_data):
    fixture, out, report = converted
    spec = check_matches_reference(out, reference_spec(reference_data, "cu_birds"), fixture)
    assert [len(spec.classes(s)) for s in ("train", "valid", "test")] == [140, 30, 30]
    assert spec.class_names[0] == "190.Red_cockaded_Woodpecker"
    assert len(spec.provenance["rejected"]) == len(fixture.corrupt) == 1


def test_full_images_are_kept(converted):
    _, out, _ = converted
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
