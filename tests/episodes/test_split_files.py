"""Split file schema: validation, deterministic JSON, resolution of names and indices."""

import json

import pytest

from episodes.records.split_file import SplitFile, SplitFileError


def _split(**kw):
    base = dict(
        dataset="toy",
        method="random",
        train=["a", "b", "c"],
        valid=["d"],
        test=["e"],
        parameters={"seed": 3},
    )
    base.update(kw)
    return SplitFile(**base)


def test_round_trip_and_identical_bytes(tmp_path):
    split = _split(achieved_divergence=0.5, embedding_hash="sha256:00")
    first = split.save(tmp_path / "a" / "s.json")
    second = split.save(tmp_path / "b" / "s.json")
    assert first.read_bytes() == second.read_bytes()
    loaded = SplitFile.load(first)
    assert loaded == split
    assert loaded.to_json() == first.read_text()
    assert json.loads(first.read_text())["method"] == "random"
    assert not list((tmp_path / "a").glob(".*")), "temporary file left behind"


def test_optional_fields_are_omitted():
    data = json.loads(_split().to_json())
    assert "class_indices" not in data and "achieved_divergence" not in data


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(valid=["a"]), "'a' is in both 'train' and 'valid'"),
        (dict(train=["a", "a"]), "more than once"),
        (dict(method="Magic split!"), "method 'Magic split!' is not a method name"),
        (dict(method=""), "method '' is not a method name"),
        (dict(train=[], valid=[], test=[]), "all of train/valid/test are empty"),
        (dict(train=["a", 1]), "list of class-name strings"),
    ],
)
def test_invalid_split_files_are_rejected(kw, message):
    with pytest.raises(SplitFileError, match=message):
        _split(**kw)


def test_unknown_keys_and_bad_json(tmp_path):
    with pytest.raises(SplitFileError, match="unknown keys"):
        SplitFile.from_dict({"dataset": "x", "method": "random", "train": ["a"], "bogus": 1})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SplitFileError, match="bad.json: not valid JSON"):
        SplitFile.load(bad)
    with pytest.raises(SplitFileError, match="does not exist"):
        SplitFile.load(tmp_path / "missing.json")


def test_resolve_maps_names_to_spec_ids_and_names_unknown_classes():
    split = _split()
    spec = ["e", "d", "c", "b", "a", "unused"]
    assert split.resolve(spec) == {"train": [4, 3, 2], "valid": [1], "test": [0]}
    with pytest.raises(SplitFileError, match=r"2 classes that are not in the dataset spec: 'a'"):
        split.resolve(["b", "c", "e"])


def test_index_tables_resolve_through_class_names():
    split = SplitFile(
        dataset="t",
        method="published",
        class_indices={"train": [2, 0], "valid": [1], "test": [3]},
        index_convention="toy",
        num_classes=4,
    )
    assert split.sizes() == {"train": 2, "valid": 1, "test": 1}
    with pytest.raises(SplitFileError, match="with_class_names"):
        split.resolve(["w", "x", "y", "z"])
    named = split.with_class_names(["w", "x", "y", "z"])
    assert (named.train, named.valid, named.test) == (["y", "w"], ["x"], ["z"])
    assert named.resolve(["z", "y", "x", "w"]) == {"train": [1, 3], "valid": [2], "test": [0]}
    with pytest.raises(SplitFileError, match="expects 4 class names"):
        split.with_class_names(["a", "b"])


def test_index_tables_are_validated():
    with pytest.raises(SplitFileError, match="outside"):
        SplitFile(
            dataset="t",
            method="published",
            num_classes=3,
            class_indices={"train": [0, 3], "valid": [1], "test": [2]},
        )
    with pytest.raises(SplitFileError, match="in both"):
        SplitFile(
            dataset="t",
            method="published",
            class_indices={"train": [0, 1], "valid": [1], "test": [2]},
        )


def test_a_split_method_added_later_is_a_valid_method():
    """The format names the method that made a file without a fixed list: a method module
    added to splits/methods/ writes files every reader accepts."""
    split = _split(method="toy_head")
    assert SplitFile.from_json(split.to_json()).method == "toy_head"
