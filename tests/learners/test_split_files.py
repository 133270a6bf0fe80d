"""Split files honoured (issue 25, item 1): a split file keeps the hierarchy wherever it still
applies (superclasses or DAG nodes whose classes all lie in one split), says in one line where
it cannot, and every command records and honours the split file it was given."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from episodes.records.dataset_spec import BiLevelHierarchy, DagHierarchy, DatasetSpec, Split
from episodes.sampling.sampler import EpisodeSampler, SamplerConfig
from learners import evaluate
from learners import train as train_cli
from learners.evaluation.evaluation_folder import split_file_tag
from tests.fixtures.cli_processes import TINY, python_m
from tests.fixtures.reader_datasets import write_dataset

ALPHABET = 5  # classes per superclass


def alphabets_spec(folder: Path) -> DatasetSpec:
    """20 classes in 4 superclasses of 5 (an Omniglot in miniature), alphabet-aligned splits."""
    spec = write_dataset(folder, per_class=(6,) * 20)
    spec.split_classes = {
        Split.TRAIN: list(range(10)),
        Split.VALID: list(range(10, 15)),
        Split.TEST: list(range(15, 20)),
    }
    spec.hierarchy = BiLevelHierarchy(
        [f"alphabet{i}" for i in range(4)],
        [c // ALPHABET for c in range(20)],
        {Split.TRAIN: [0, 1], Split.VALID: [2], Split.TEST: [3]},
    )
    spec.save(folder)
    return spec


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> tuple[DatasetSpec, Path, Path]:
    """The dataset, an alphabet-aligned split file (other alphabets than the spec's) and a
    split file that cuts alphabets across splits."""
    root = tmp_path_factory.mktemp("split-files")
    spec = alphabets_spec(root / "toy")
    n = spec.class_names
    aligned = root / "aligned.json"
    aligned.write_text(json.dumps({"train": n[0:5] + n[15:20], "valid": n[5:10], "test": n[10:15]}))
    mixed = root / "mixed.json"
    mixed.write_text(
        json.dumps(
            {"train": n[0:12:2] + n[1:8:2], "valid": n[13:16], "test": n[16:20] + [n[1 + 8]]}
        )
    )
    return spec, aligned, mixed


def test_an_aligned_split_file_keeps_one_alphabet_per_episode(toy) -> None:
    spec, aligned, _ = toy
    names = json.loads(aligned.read_text())
    resplit = spec.with_splits(names["train"], names["valid"], names["test"], source=str(aligned))
    assert resplit.hierarchy_note is None
    assert resplit.hierarchy.superclass_splits == {
        Split.TRAIN: [0, 3],
        Split.VALID: [1],
        Split.TEST: [2],
    }
    for split, allowed in (("train", {0, 3}), ("test", {2})):
        sampler = EpisodeSampler(resplit, split, SamplerConfig(), seed=0)
        assert sampler.hierarchy_kind == "bilevel"
        for index in range(30):
            alphabets = {c // ALPHABET for c in sampler.episode(index).class_ids}
            assert len(alphabets) == 1 and alphabets <= allowed


def test_a_split_file_cutting_alphabets_says_so_in_one_line(toy) -> None:
    spec, _, mixed = toy
    names = json.loads(mixed.read_text())
    resplit = spec.with_splits(names["train"], names["valid"], names["test"], source=str(mixed))
    note = resplit.hierarchy_note
    assert note is not None and "\n" not in note and str(mixed) in note
    assert "'alphabet1'" in note and "flat" in note  # alphabet1 spans train and test
    sampler = EpisodeSampler(resplit, "train", SamplerConfig(), seed=0)
    assert sampler.hierarchy_kind == "flat"
    mixes = [len({c // ALPHABET for c in sampler.episode(i).class_ids}) for i in range(20)]
    assert max(mixes) > 1  # flat, as the note says: classes of several alphabets
    # The command says it, and its header says which hierarchy runs.
    read = python_m(
        "episodes.read", "--dataset", str(spec.root), "--split", "train",
        "--split-file", str(mixed), "--episodes", "1",
    )  # fmt: skip
    assert read.returncode == 0, read.stderr
    assert "hierarchy: flat" in read.stdout
    assert read.stderr.strip() == f"note: {note}"


def dag_spec() -> DatasetSpec:
    """Leaves n00..n19; train: t -> x (n00-n04), y (n05-n09); valid: v (n10-n14); test: w."""
    names = [f"n{i:02d}" for i in range(20)]

    def node(wn_id, children=(), parents=()):
        return {"wn_id": wn_id, "children": list(children), "parents": list(parents)}

    def group(parent, leaves, grandparent=()):
        return [node(parent, leaves, grandparent)] + [node(leaf, (), (parent,)) for leaf in leaves]

    hierarchy = DagHierarchy.from_node_lists(
        {
            Split.TRAIN: [node("t", ("x", "y"))]
            + group("x", names[0:5], ("t",))
            + group("y", names[5:10], ("t",)),
            Split.VALID: group("v", names[10:15]),
            Split.TEST: group("w", names[15:20]),
        }
    )
    return DatasetSpec(
        name="dag",
        class_names=names,
        images_per_class=[6] * 20,
        split_classes={
            Split.TRAIN: list(range(10)),
            Split.VALID: list(range(10, 15)),
            Split.TEST: list(range(15, 20)),
        },
        hierarchy=hierarchy,
    )


def test_dag_nodes_wholly_in_a_split_are_kept_and_the_others_named() -> None:
    spec = dag_spec()
    n = spec.class_names
    resplit = spec.with_splits(n[0:5] + n[10:15], n[5:10], n[15:20], source="s.json")
    assert resplit.hierarchy_note is None
    train = resplit.hierarchy.nodes(Split.TRAIN)
    internal = sorted(k for k, v in train.items() if not v.is_leaf)
    assert internal == ["v", "x"]  # t spans y too, which went to valid
    assert set(resplit.hierarchy.leaves(Split.TRAIN)) == set(n[0:5] + n[10:15])
    sampler = EpisodeSampler(resplit, "train", SamplerConfig(), seed=0)
    assert sampler.hierarchy_kind == "dag"
    for index in range(20):
        ids = set(sampler.episode(index).class_ids)
        assert ids <= set(range(5)) or ids <= set(range(10, 15))
    # valid and test swap one class: no node lies wholly in either any more
    cut = spec.with_splits(n[0:10], n[10:14] + [n[19]], n[14:19], source="cut.json")
    note = cut.hierarchy_note
    assert note is not None and note.startswith("split file cut.json: valid (5 of its classes")
    assert "; test (5 of its classes, e.g. 'n14'" in note and "train" not in note
    assert EpisodeSampler(cut, "train", SamplerConfig(), seed=0).hierarchy_kind == "dag"
    assert EpisodeSampler(cut, "test", SamplerConfig(), seed=0).hierarchy_kind == "flat"


@pytest.mark.slow
def test_evaluate_honours_records_or_refuses_a_split_file(toy, tmp_path: Path, capsys) -> None:
    spec, aligned, mixed = toy
    run = tmp_path / "run"
    assert train_cli.main([
        "--method", "protonet", "--dataset", str(spec.root), "--steps", "2",
        "--checkpoint-every", "2", "--validation-episodes", "0", "--output", str(run), *TINY,
    ]) == 0  # fmt: skip
    common = ["--run", str(run), "--episodes", "4", "--no-hardness", "--no-progress"]
    for split_file in (aligned, mixed):
        capsys.readouterr()
        assert evaluate.main([*common, "--split-file", str(split_file)]) == 0
        out = Path(capsys.readouterr().out.strip().splitlines()[-1].split()[1].rsplit("/", 1)[0])
        assert out.name.endswith(f"-{split_file_tag(split_file)}")  # two split files, two folders
        summary = json.loads((out / "summary.json").read_text())
        assert summary["settings"]["split_file"] == str(split_file)
        test_names = set(json.loads(split_file.read_text())["test"])
        with (out / "classes.csv").open() as handle:
            classes = {int(row["class_id"]) for row in csv.DictReader(handle)}
        assert classes and {spec.class_names[c] for c in classes} <= test_names
    missing = tmp_path / "nope.json"
    result = python_m("learners.evaluate", *common, "--split-file", str(missing))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: --split-file {missing}: no such file"
    assert sorted(p.name for p in (run / "eval").iterdir()) == sorted(
        f"test-last-variable-4ep-{split_file_tag(s)}" for s in (aligned, mixed)
    )
