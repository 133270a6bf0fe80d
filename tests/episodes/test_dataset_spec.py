"""The spec loader reads our specs and all 11 reference Meta-Dataset spec files as they are."""

from __future__ import annotations

import json

import pytest

from episodes.records.dataset_spec import (
    BiLevelHierarchy,
    DagHierarchy,
    DatasetSpec,
    SpecError,
    Split,
    load_spec,
)

# name: (classes, train, valid, test) as the reference specs state them.
EXPECTED = {
    "aircraft": (100, 70, 15, 15),
    "cu_birds": (200, 140, 30, 30),
    "dtd": (47, 33, 7, 7),
    "fungi": (1394, 994, 200, 200),
    "ilsvrc_2012": (1000, 712, 158, 130),
    "ilsvrc_2012_v2": (1000, 1000, 0, 0),
    "mscoco": (80, 0, 40, 40),
    "omniglot": (1623, 883, 81, 659),
    "quickdraw": (345, 241, 52, 52),
    "traffic_sign": (43, 0, 0, 43),
    "vgg_flower": (102, 71, 15, 16),
}


def _spec_path(reference_data, name):
    return reference_data / "dataset_specs" / f"{name}_dataset_spec.json"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reference_specs_load_with_their_class_counts(reference_data, name):
    spec = load_spec(_spec_path(reference_data, name))
    total, train, valid, test = EXPECTED[name]
    assert spec.name == name
    assert spec.source_format == "meta-dataset"
    assert spec.num_classes == total
    assert [len(spec.classes(s)) for s in Split] == [train, valid, test]
    # Class ids are contiguous with train < valid < test, as the reference assigns them.
    ids = spec.classes("train") + spec.classes("valid") + spec.classes("test")
    assert ids == list(range(total))
    assert all(n > 0 for n in spec.images_per_class)
    assert spec.root == _spec_path(reference_data, name).parent


def test_reference_spec_image_counts_match_published_numbers(reference_data):
    assert load_spec(_spec_path(reference_data, "omniglot")).total_images == 1623 * 20
    assert load_spec(_spec_path(reference_data, "cu_birds")).total_images == 11788
    assert load_spec(_spec_path(reference_data, "dtd")).total_images == 47 * 120
    ilsvrc = load_spec(_spec_path(reference_data, "ilsvrc_2012"))
    leaf_counts = json.loads(
        (reference_data / "dataset_specs" / "ilsvrc_2012_num_leaf_images.json").read_text()
    )
    assert {ilsvrc.class_names[c]: ilsvrc.images_per_class[c] for c in range(1000)} == leaf_counts


def test_omniglot_reference_alphabets(reference_data):
    spec = load_spec(_spec_path(reference_data, "omniglot"))
    h = spec.hierarchy
    assert isinstance(h, BiLevelHierarchy)
    assert [len(h.superclasses(s)) for s in Split] == [25, 5, 20]
    assert h.superclass_names[0] == "Anglo-Saxon_Futhorc"
    assert len(h.classes_of(0)) == 29
    # Every class of an alphabet is in the alphabet's split.
    for split in Split:
        classes = set(spec.classes(split))
        for s in h.superclasses(split):
            assert set(h.classes_of(s)) <= classes
    # Valid alphabets are the 5 smallest background alphabets.
    background = h.superclasses("train") + h.superclasses("valid")
    sizes = sorted(background, key=lambda s: len(h.classes_of(s)))
    assert max(len(h.classes_of(s)) for s in h.superclasses("valid")) <= min(
        len(h.classes_of(s)) for s in h.superclasses("train")
    )
    assert set(sizes[:5]) == set(h.superclasses("valid"))


def test_ilsvrc_reference_dag_node_and_leaf_counts(reference_data):
    spec = load_spec(_spec_path(reference_data, "ilsvrc_2012"))
    dag = spec.hierarchy
    assert isinstance(dag, DagHierarchy)
    nodes = {s: len(dag.nodes(s)) for s in Split}
    leaves = {s: len(dag.leaves(s)) for s in Split}
    assert nodes == {Split.TRAIN: 1011, Split.VALID: 200, Split.TEST: 180}
    assert leaves == {Split.TRAIN: 712, Split.VALID: 158, Split.TEST: 130}
    assert dag.roots("train") == ["n00001740"]  # entity
    assert dag.roots("valid") == ["n02075296"]  # carnivore
    assert dag.roots("test") == ["n03183080"]  # device
    for split in Split:
        span = dag.spanned_leaves(split)
        root = dag.roots(split)[0]
        assert span[root] == frozenset(dag.leaves(split))
        # Leaves of a split's DAG are exactly the split's class names.
        assert sorted(spec.class_names[c] for c in spec.classes(split)) == dag.leaves(split)


def test_our_spec_round_trips(tmp_path):
    spec = DatasetSpec(
        name="toy",
        class_names=["a-1", "a-2", "b-1", "c-1"],
        images_per_class=[3, 4, 5, 6],
        split_classes={Split.TRAIN: [0, 1], Split.VALID: [2], Split.TEST: [3]},
        hierarchy=BiLevelHierarchy(
            ["a", "b", "c"], [0, 0, 1, 2], {Split.TRAIN: [0], Split.VALID: [1], Split.TEST: [2]}
        ),
        image_format="png",
        provenance={"source": "unit-test"},
    )
    spec.save(tmp_path)
    loaded = load_spec(tmp_path)
    assert loaded.to_json() == spec.to_json()
    assert loaded.classes("valid") == [2]
    assert loaded.class_id("b-1") == 2
    assert loaded.records_path(3) == tmp_path / "3.tfrecords"


def test_with_splits_overrides_by_class_name():
    spec = DatasetSpec("toy", ["x", "y", "z", "w"], [1, 1, 1, 1])
    with pytest.raises(SpecError, match="defines no class splits"):
        spec.classes("train")
    resplit = spec.with_splits(["w", "x"], ["y"], ["z"], source="s.json")
    assert resplit.classes("train") == [0, 3]
    with pytest.raises(SpecError, match="not in dataset 'toy'.*'nope'"):
        spec.with_splits(["nope"], [], [])


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"name": "x"}', "neither"),
        (
            '{"__class__": "DatasetSpecification", "name": "x", "classes_per_split": {"TRAIN": 2},'
            ' "images_per_class": {"0": 1}, "class_names": {"0": "a"}}',
            "sums to 2",
        ),
        ('{"__class__": "Mystery", "name": "x"}', "unknown reference spec class"),
    ],
)
def test_bad_spec_files_give_one_clear_error(tmp_path, content, message):
    path = tmp_path / "dataset_spec.json"
    path.write_text(content)
    with pytest.raises(SpecError, match=message) as info:
        load_spec(path)
    assert str(path) in str(info.value)


def test_missing_spec_and_unknown_split(tmp_path):
    with pytest.raises(SpecError, match="no dataset spec found"):
        load_spec(tmp_path)
    with pytest.raises(SpecError, match="unknown split 'training'"):
        Split.parse("training")
    assert Split.parse("Split.VALID") is Split.VALID
    assert Split.parse("validation") is Split.VALID


def test_reference_python_repr_values_are_accepted(tmp_path):
    raw = {
        "__class__": "DatasetSpecification",
        "name": "repr",
        "classes_per_split": "{<Split.TRAIN: 0>: 1, <Split.VALID: 1>: 1, <Split.TEST: 2>: 0}",
        "images_per_class": "{0: 5, 1: 6}",
        "class_names": {"0": "a", "1": "b"},
    }
    # The enum repr is not a literal; such keys arrive as plain strings in the JSON.
    raw["classes_per_split"] = {"Split.TRAIN": 1, "Split.VALID": 1, "Split.TEST": 0}
    (tmp_path / "dataset_spec.json").write_text(json.dumps(raw))
    spec = load_spec(tmp_path)
    assert spec.images_per_class == [5, 6]
    assert spec.classes("valid") == [1]
