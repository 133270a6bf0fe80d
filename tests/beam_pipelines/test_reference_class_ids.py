"""Class id k names the same class as in the shipped reference spec, for every shipped spec
whose source has a raw fixture: the fixture (all classes of the published split) is planned
and the plan's class order compared with the spec's ids. Omniglot uses a fixture with the
real alphabets' names and sizes, which is what decides the valid alphabets' order."""

from __future__ import annotations

import json

import pytest

from beam_pipelines.sources import get_source_class
from beam_pipelines.sources.omniglot import OmniglotSource
from episodes.records.dataset_spec import Split, load_spec
from tests.fixtures.meta_dataset_checks import convert_source
from tests.fixtures.raw.aircraft import write_aircraft_fixture
from tests.fixtures.raw.cu_birds import write_cu_birds_fixture
from tests.fixtures.raw.dtd import write_dtd_fixture
from tests.fixtures.raw.fungi import write_fungi_fixture
from tests.fixtures.raw.mscoco import write_mscoco_fixture
from tests.fixtures.raw.omniglot import write_omniglot_fixture
from tests.fixtures.raw.quickdraw import write_quickdraw_fixture
from tests.fixtures.raw.traffic_sign import write_traffic_sign_fixture
from tests.fixtures.raw.vgg_flower import write_vgg_flower_fixture

FLAT_FIXTURES = {
    "aircraft": write_aircraft_fixture,
    "cu_birds": write_cu_birds_fixture,
    "dtd": write_dtd_fixture,
    "fungi": write_fungi_fixture,
    "mscoco": write_mscoco_fixture,
    "quickdraw": write_quickdraw_fixture,
    "traffic_sign": write_traffic_sign_fixture,
    "vgg_flower": write_vgg_flower_fixture,
}
# Shipped specs without a test here, and why.
NOT_COMPARED = {
    "ilsvrc_2012": "tests/beam_pipelines/sources/test_ilsvrc.py plans all 1000 classes against it",
    "ilsvrc_2012_v2": "the all-classes-train variant; the ilsvrc_2012 converter has no such mode",
}


def _reference(reference_data, name):
    return load_spec(reference_data / "dataset_specs" / f"{name}_dataset_spec.json")


def test_every_shipped_spec_is_compared(reference_data):
    shipped = {
        p.name.removesuffix("_dataset_spec.json")
        for p in (reference_data / "dataset_specs").glob("*_dataset_spec.json")
    }
    assert shipped == set(FLAT_FIXTURES) | {"omniglot"} | set(NOT_COMPARED)


@pytest.mark.parametrize("name", sorted(FLAT_FIXTURES))
def test_flat_source_plans_the_reference_class_ids(tmp_path, reference_data, name):
    """These sources already matched the reference: class id k is the reference's class k."""
    fixture = FLAT_FIXTURES[name](tmp_path / "raw")
    plan = get_source_class(name)().plan(fixture.root)
    reference = _reference(reference_data, name)
    assert [c.name for c in plan.classes] == reference.class_names
    for split in Split:
        ids = [i for i, c in enumerate(plan.classes) if c.split == split]
        assert ids == reference.classes(split), split


def _real_omniglot_alphabets(reference_data):
    """(background, evaluation) alphabets with the real names and character counts."""
    raw = json.loads((reference_data / "dataset_specs" / "omniglot_dataset_spec.json").read_text())
    sizes = [
        (raw["superclass_names"][str(s)], raw["classes_per_superclass"][str(s)])
        for s in range(len(raw["superclass_names"]))
    ]
    per_split = raw["superclasses_per_split"]
    n_background = per_split["TRAIN"] + per_split["VALID"]
    return sorted(sizes[:n_background]), sorted(sizes[n_background:])


def test_omniglot_plans_the_reference_class_ids(tmp_path, reference_data):
    """The valid alphabets come smallest first (ids 883-963), as in the reference spec."""
    background, evaluation = _real_omniglot_alphabets(reference_data)
    fixture = write_omniglot_fixture(
        tmp_path, drawers=1, background=background, evaluation=evaluation, side=12
    )
    plan = OmniglotSource().plan(fixture.root)
    reference = _reference(reference_data, "omniglot")
    assert [c.name for c in plan.classes] == reference.class_names
    assert plan.superclass_names == reference.hierarchy.superclass_names
    assert reference.classes("valid") == list(range(883, 964))
    assert plan.classes[883].name.startswith("Blackfoot_")
    assert plan.classes[963].name == "Alphabet_of_the_Magi-character20"
    for split in Split:
        assert [i for i, c in enumerate(plan.classes) if c.split == split] == reference.classes(
            split
        )


def test_omniglot_converted_valid_alphabets_smallest_first(tmp_path):
    """End to end on the small fixture: valid alphabets Gamma/Epsilon/Eta (2), Delta (3),
    Zeta (4) get their ids smallest first, ties by name."""
    fixture = write_omniglot_fixture(tmp_path / "raw", drawers=1)
    convert_source(OmniglotSource, fixture.root, tmp_path / "out")
    spec = load_spec(tmp_path / "out")
    h = spec.hierarchy
    valid = [h.superclass_names[s] for s in h.superclasses("valid")]
    assert valid == ["Epsilon", "Eta", "Gamma", "Delta", "Zeta"]
    first_valid = spec.classes("valid")[0]
    assert spec.class_names[first_valid : first_valid + 3] == [
        "Epsilon-character01",
        "Epsilon-character02",
        "Eta-character01",
    ]
    assert [h.superclass_names[s] for s in h.superclasses("train")] == ["Alpha", "Beta", "Theta"]
