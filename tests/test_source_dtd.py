"""Describable Textures conversion: categories, published split, the stray `.directory`,
byte-identical re-conversion."""

from __future__ import annotations

import pytest

from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.dtd import DTDSource
from tests.meta_dataset_checks import (
    check_matches_reference,
    convert_source,
    digest,
    reference_spec,
)
from tests.raw_fixtures.dtd import write_dtd_fixture


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    fixture = write_dtd_fixture(tmp_path_factory.mktemp("raw"), images_per_class=2)
    out = tmp_path_factory.mktemp("out") / "dtd"
    return fixture, out, convert_source(DTDSource, fixture.root, out)


def test_published_split_gives_the_reference_classes(converted, reference_data):
    fixture, out, report = converted
    spec = check_matches_reference(out, reference_spec(reference_data, "dtd"), fixture)
    assert [len(spec.classes(s)) for s in ("train", "valid", "test")] == [33, 7, 7]
    assert report.images == 47 * 2
    rejected = {r["path"]: r["reason"] for r in spec.provenance["rejected"]}
    directory = str(fixture.root / fixture.skipped[0])
    assert "hidden file" in rejected[directory]


def test_reconversion_is_byte_identical(converted, tmp_path):
    fixture, out, _ = converted
    again = convert_source(DTDSource, fixture.root, tmp_path / "dtd")
    assert digest(again.output) == digest(out)


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
