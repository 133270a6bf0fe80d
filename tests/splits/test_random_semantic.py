"""Random and semantic (hierarchy) splits."""

import json

import pytest

from episodes.records.split_file import SplitFile
from splits import make
from splits.methods.random.algorithm import random_split
from splits.methods.semantic.algorithm import HierarchyError, dag_split, leaves_of, superclass_split

NAMES = [f"class{i:03d}" for i in range(100)]


def test_random_split_sizes_seeds_and_coverage():
    a = random_split(NAMES, (0.7, 0.15, 0.15), seed=0)
    b = random_split(NAMES, (0.7, 0.15, 0.15), seed=0)
    c = random_split(NAMES, (0.7, 0.15, 0.15), seed=1)
    assert a.sizes() == {"train": 70, "valid": 15, "test": 15}
    assert a == b and a.train != c.train
    assert sorted(a.train + a.valid + a.test) == NAMES
    assert a.method == "random" and a.parameters["seed"] == 0


def test_random_split_rejects_bad_fractions_and_too_few_classes():
    with pytest.raises(ValueError, match="must sum to 1"):
        random_split(NAMES, (0.7, 0.2, 0.2))
    with pytest.raises(ValueError, match="2 classes are too few .* 3 splits are asked for"):
        random_split(NAMES[:2], (0.6, 0.2, 0.2))
    # floor(0.2 * 3) = 0, but no asked-for split is left empty: one class each.
    assert random_split(NAMES[:3], (0.6, 0.2, 0.2)).sizes() == {"train": 1, "valid": 1, "test": 1}
    assert random_split(NAMES[:4], (0.6, 0.2, 0.2)).sizes() == {"train": 2, "valid": 1, "test": 1}
    assert random_split(NAMES[:4], (1.0, 0.0, 0.0)).sizes() == {"train": 4, "valid": 0, "test": 0}


def test_random_cli_reads_a_reference_spec(tmp_path, capsys, reference_data):
    spec = reference_data / "dataset_specs" / "omniglot_dataset_spec.json"
    out = tmp_path / "split.json"
    assert (
        make.main(
            [
                "--method",
                "random",
                "--dataset",
                str(spec),
                "--fractions",
                "0.7",
                "0.15",
                "0.15",
                "--seed",
                "0",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    split = SplitFile.load(out)
    assert split.dataset == "omniglot"  # the spec's name, not the file stem
    assert split.sizes() == {"train": 1137, "valid": 243, "test": 243}
    assert (
        make.main(
            [
                "--method",
                "random",
                "--class-names",
                str(tmp_path / "none.json"),
                "--output",
                str(tmp_path / "other.json"),
            ]
        )
        == 2
    )
    assert "none.json does not exist" in capsys.readouterr().err
    assert (
        make.main(
            [
                "--method",
                "random",
                "--dataset",
                str(tmp_path / "none.json"),
                "--output",
                str(tmp_path / "other.json"),
            ]
        )
        == 2
    )
    assert "none.json: no dataset spec found" in capsys.readouterr().err
    assert not (tmp_path / "other.json").exists()


MAPPING = {f"{s}_{k}": s for s in "ABCDEFGHIJ" for k in range(3)}


def test_superclass_split_given_assignment():
    split = superclass_split(
        MAPPING, assignment={"train": list("ABCDEF"), "valid": ["G", "H"], "test": ["I", "J"]}
    )
    assert split.sizes() == {"train": 18, "valid": 6, "test": 6}
    assert all(c.split("_")[0] in "IJ" for c in split.test)


def test_superclass_split_seeded_and_ordered():
    a = superclass_split(MAPPING, counts=(6, 2, 2), seed=0)
    b = superclass_split(MAPPING, counts=(6, 2, 2), seed=0)
    c = superclass_split(MAPPING, counts=(6, 2, 2), seed=5)
    assert a == b and a.parameters["superclasses"] != c.parameters["superclasses"]
    for name in ("train", "valid", "test"):
        supers = {x.split("_")[0] for x in a.classes(name)}
        assert supers == set(a.parameters["superclasses"][name])
    ordered = superclass_split(MAPPING, counts=(6, 2, 2), superclass_order=list("ABCDEFGHIJ"))
    assert ordered.parameters["superclasses"]["valid"] == ["G", "H"]


@pytest.mark.parametrize(
    "kw, message",
    [
        (
            dict(assignment={"train": list("ABCDEFGH"), "valid": ["I"], "test": ["I", "J"]}),
            "more than one split",
        ),
        (
            dict(assignment={"train": list("ABCDEFGH"), "valid": ["I"], "test": ["Z"]}),
            "unknown superclasses",
        ),
        (dict(assignment={"train": list("ABCDEFGH"), "valid": ["I"], "test": []}), "not assigned"),
        (dict(counts=(6, 2, 3), seed=0), "sum to 11 but there are 10"),
        (dict(counts=(6, 2, 2)), "need either a seed or a superclass_order"),
    ],
)
def test_superclass_split_errors(kw, message):
    with pytest.raises(HierarchyError, match=message):
        superclass_split(MAPPING, **kw)


DAG = {
    "animal": ["entity"],
    "device": ["entity"],
    "carnivore": ["animal"],
    "dog": ["carnivore"],
    "cat": ["carnivore"],
    "cow": ["animal"],
    "phone": ["device"],
    "robot_dog": ["device", "animal"],
    "rock": ["entity"],
}


def test_dag_split_follows_roots():
    assert leaves_of(DAG) == ["dog", "cat", "cow", "phone", "robot_dog", "rock"]
    split = dag_split(DAG, valid_roots=["carnivore"], test_roots=["device"])
    assert split.train == ["cow", "rock"]
    assert split.valid == ["dog", "cat"]
    assert split.test == ["phone", "robot_dog"]


def test_dag_split_errors():
    with pytest.raises(HierarchyError, match="under both"):
        dag_split(DAG, valid_roots=["animal"], test_roots=["device"])
    with pytest.raises(HierarchyError, match="root 'plant'"):
        dag_split(DAG, valid_roots=["plant"], test_roots=["device"])


def test_semantic_cli_fc100_and_dag(tmp_path):
    out = tmp_path / "fc100.json"
    assert (
        make.main(
            [
                "--method",
                "semantic",
                "--kind",
                "superclass",
                "--hierarchy",
                "builtin:cifar100",
                "--preset",
                "fc100",
                "--dataset-name",
                "cifar100",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    assert SplitFile.load(out).sizes() == {"train": 60, "valid": 20, "test": 20}
    dag = tmp_path / "dag.json"
    dag.write_text(json.dumps({"parents": DAG}))
    out2 = tmp_path / "dag_split.json"
    assert (
        make.main(
            [
                "--method",
                "semantic",
                "--kind",
                "dag",
                "--hierarchy",
                str(dag),
                "--valid-roots",
                "carnivore",
                "--test-roots",
                "device",
                "--output",
                str(out2),
            ]
        )
        == 0
    )
    assert SplitFile.load(out2).valid == ["dog", "cat"]
    seeded = tmp_path / "seeded.json"
    assert (
        make.main(
            [
                "--method",
                "semantic",
                "--kind",
                "superclass",
                "--hierarchy",
                "builtin:cifar100",
                "--counts",
                "12",
                "4",
                "4",
                "--seed",
                "3",
                "--output",
                str(seeded),
            ]
        )
        == 0
    )
    assert SplitFile.load(seeded).sizes() == {"train": 60, "valid": 20, "test": 20}
