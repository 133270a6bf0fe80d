"""Describable Textures conversion: categories, published split, the stray `.directory`,
byte-identical re-conversion."""

from __future__ import annotations

import functools

import pytest

from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.dtd import DTDSource
from tests.fixtures.raw.dtd import write_dtd_fixture
from tests.fixtures.source_test_case import SourceTestCase


class TestDtd(SourceTestCase):
    SOURCE = DTDSource
    FIXTURE = functools.partial(write_dtd_fixture, images_per_class=2)
    CLASSES_PER_SPLIT = (33, 7, 7)
    IMAGES_PER_CLASS = 2
    TOTAL_IMAGES = 47 * 2
    REJECTED = 2  # the truncated image and the stray .directory
    REFERENCE_SPEC = "dtd"

    def test_the_stray_directory_file_is_rejected_as_hidden(self, converted):
        fixture, _, _ = converted
        rejected = {r["path"]: r["reason"] for r in converted.spec.provenance["rejected"]}
        directory = str(fixture.root / fixture.skipped[0])
        assert "hidden file" in rejected[directory]


def test_random_split_is_seeded(tmp_path):
    fixture = write_dtd_fixture(
        tmp_path / "raw", classes=["banded", "blotchy", "braided", "bubbly"]
    )
    plans = [DTDSource(random_split=True, split_seed=seed).plan(fixture.root) for seed in (3, 3, 4)]
    names = [[(c.name, c.split) for c in p.classes] for p in plans]
    assert names[0] == names[1]
    assert sorted(n for n, _ in names[0]) == ["banded", "blotchy", "braided", "bubbly"]
    assert plans[0].provenance["split_origin"] == "random:seed=3,fractions=0.7,0.15,0.15"
    with pytest.raises(LayoutError, match="'chequered' of the split list"):
        DTDSource().plan(fixture.root)
    with pytest.raises(LayoutError, match="not a Describable Textures layout"):
        DTDSource().plan(fixture.root / "images")
