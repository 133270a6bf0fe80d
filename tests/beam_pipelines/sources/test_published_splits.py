"""Published Meta-Dataset split lists (stored once, in episodes/records/published/meta_dataset/),
--split-file read by the one split-file parser, and seeded splits shared by the sources."""

from __future__ import annotations

import json

import pytest

from beam_pipelines import convert as convert_cli
from beam_pipelines.sources._lib.published_splits import (
    REFERENCE_DATA,
    SPLIT_ORDER,
    ListedSplitConfig,
    check_lists_match,
    load_split_lists,
    published_split_name,
    random_split_lists,
    read_label_list,
    resolve_class_splits,
)
from beam_pipelines.sources.base import LayoutError
from episodes.records.dataset_spec import Split, load_spec
from episodes.records.published_splits import load_published
from episodes.records.split_file import SplitFile
from tests.fixtures.raw.dtd import write_dtd_fixture

DATASETS = [
    "aircraft",
    "cu_birds",
    "dtd",
    "fungi",
    "mscoco",
    "quickdraw",
    "traffic_sign",
    "vgg_flower",
]


@pytest.mark.parametrize("dataset", DATASETS)
def test_published_lists_follow_the_reference_specs(dataset, reference_data):
    published = load_published(published_split_name(dataset))
    reference = load_spec(reference_data / "dataset_specs" / f"{dataset}_dataset_spec.json")
    assert [n for s in SPLIT_ORDER for n in published.classes(s.value)] == reference.class_names
    for split in Split:
        assert len(published.classes(split.value)) == len(reference.classes(split))
    as_published = json.loads((reference_data / "splits" / f"{dataset}_splits.json").read_text())
    for split in SPLIT_ORDER:
        assert published.classes(split.value) == as_published[split.value]


def test_split_lists_are_stored_once():
    assert not (REFERENCE_DATA / "splits").exists()
    assert published_split_name("dtd") == "meta_dataset/dtd"
    assert published_split_name("emnist") is None


def test_label_lists():
    flowers, signs = (
        read_label_list("VggFlower_labels.txt"),
        read_label_list("TrafficSign_labels.txt"),
    )
    assert len(flowers) == 102 and flowers[0] == "pink primrose"
    assert len(signs) == 43 and signs[14] == "Stop"


def test_bad_split_files(tmp_path):
    path = tmp_path / "s.json"
    for text, message in [
        ("[1, 2]", "expected a split file of this toolkit .* got a JSON list"),
        ("{not json", "not valid JSON"),
        ('{"train": ["a"], "valid": [], "test": ["a"]}', "class 'a' is in both 'train' and 'test'"),
        ('{"train": "a", "valid": [], "test": []}', "'train' must be a list of class-name strings"),
        ('{"classes": ["a"]}', r"unknown keys \['classes'\]"),
        ('{"train": ["a"]}', "no valid / test list"),
        (
            '{"dataset": "dtd", "train": ["a"], "valid": [], "test": []}',
            "is for dataset 'dtd', not 'fungi'",
        ),
    ]:
        path.write_text(text)
        with pytest.raises(LayoutError, match=message) as raised:
            load_split_lists(path, "fungi")
        assert str(path) in str(raised.value)
    with pytest.raises(LayoutError, match="--split-file: split file .*none.json does not exist"):
        load_split_lists(tmp_path / "none.json")
    path.write_text('{"train": ["a"], "validation": ["b"], "test": []}')
    assert load_split_lists(path, "fungi")[Split.VALID] == ["b"]  # no "dataset": any dataset


def test_toolkit_split_files_are_read_too(tmp_path):
    """A split file written by the split tools (with "method") is a --split-file as well."""
    path = tmp_path / "dtd_random.json"
    SplitFile(dataset="dtd", method="random", train=["b"], valid=["a"], test=["c"]).save(path)
    assert load_split_lists(path, "dtd") == {
        Split.TRAIN: ["b"],
        Split.VALID: ["a"],
        Split.TEST: ["c"],
    }
    with pytest.raises(LayoutError, match="is for dataset 'dtd', not 'fungi'"):
        load_split_lists(path, "fungi")


def test_matching_the_data():
    lists = {Split.TRAIN: ["a", "b"], Split.VALID: ["c"], Split.TEST: []}
    check_lists_match(lists, ["c", "b", "a"], "/raw", "x")
    with pytest.raises(LayoutError, match="/raw: class 'c' of the split list \\(x\\) is missing"):
        check_lists_match(lists, ["a", "b"], "/raw", "x")
    with pytest.raises(LayoutError, match="class 'd' found in the data is in no list"):
        check_lists_match(lists, ["a", "b", "c", "d"], "/raw", "x")


def test_random_splits_are_seeded_and_sized():
    names = [f"class{i:03d}" for i in range(102)]
    a = random_split_lists(names, (0.7, 0.15, 0.15), seed=5)
    assert a == random_split_lists(list(reversed(names)), (0.7, 0.15, 0.15), seed=5)
    assert a != random_split_lists(names, (0.7, 0.15, 0.15), seed=6)
    assert [len(a[s]) for s in SPLIT_ORDER] == [72, 15, 15]
    config = ListedSplitConfig(random_split=True, split_seed=5)
    resolved = resolve_class_splits("dtd", names, config, "/raw")
    assert resolved.lists == a and resolved.sha256 is None
    no_list = resolve_class_splits("my_dataset", names, ListedSplitConfig(), "/raw")
    assert no_list.origin.startswith("random:seed=0")


def test_split_file_through_the_cli(tmp_path, capsys):
    fixture = write_dtd_fixture(tmp_path / "raw", classes=["banded", "zigzagged"])
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["zigzagged"], "valid": [], "test": ["banded"]}))
    out = tmp_path / "out"
    argv = ["--source", "dtd", "--input", str(fixture.root), "--output", str(out)]
    assert convert_cli.main(argv) == 2
    assert "'chequered' of the split list (published:meta_dataset/dtd)" in capsys.readouterr().err
    assert convert_cli.main(argv + ["--split-file", str(split / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope.json does not exist" in err
    assert convert_cli.main(argv + ["--split-file", str(split)]) == 0
    assert "train 1, valid 0, test 1" in capsys.readouterr().out
    assert load_spec(out).class_names == ["zigzagged", "banded"]
