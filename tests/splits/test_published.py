"""Published split files: the ATG paper's tables and Meta-Dataset's splits."""

import json

import pytest

from episodes.records.index_conventions import (
    CIFAR100_COARSE_NAMES,
    CIFAR100_FINE_NAMES,
    CIFAR100_SUPERCLASS_MEMBERS,
    EMNIST_BYCLASS_NAMES,
)
from episodes.records.published_splits import PUBLISHED_DIR, list_published, load_published
from episodes.records.split_file import read_split_file
from splits import published_meta_dataset, published_tables
from splits.published_tables import TableParseError, parse_tables
from tests.fixtures.paths import REFERENCE_DATA, SHARED

PAPER = SHARED / "papers" / "atg-arnold-sha.txt"
REFERENCE = REFERENCE_DATA
EXPECTED_COUNTS = {
    "cifar100": (60, 20, 20),
    "mini_imagenet": (60, 20, 20),
    "emnist": (38, 12, 12),
    "lfw10": (96, 31, 31),
    "tiered_imagenet": (366, 121, 121),
}
needs_paper = pytest.mark.skipif(not PAPER.is_file(), reason="ATG paper text not available")
needs_reference = pytest.mark.skipif(not REFERENCE.is_dir(), reason="reference data missing")


def _sizes(split):
    s = split.sizes()
    return s["train"], s["valid"], s["test"]


def test_committed_atg_tables_have_the_printed_counts():
    names = [n for n in list_published() if n.startswith("atg/")]
    assert len(names) == 20
    for name in names:
        split = load_published(name)
        assert _sizes(split) == EXPECTED_COUNTS[split.dataset], name
        assert split.parameters["R"] in (0.04, 0.32, 0.64, 0.96)
        assert "Table" in split.source
        covered = sorted(i for v in split.class_indices.values() for i in v)
        assert covered == list(range(split.num_classes))


@needs_paper
def test_generator_reproduces_committed_files_byte_for_byte(tmp_path):
    assert published_tables.main(["--paper", str(PAPER), "--out-dir", str(tmp_path)]) == 0
    generated = sorted(p.name for p in tmp_path.glob("*.json"))
    assert len(generated) == 20
    for name in generated:
        assert (tmp_path / name).read_bytes() == (PUBLISHED_DIR / "atg" / name).read_bytes()


@needs_paper
def test_tables_keep_indices_as_printed():
    splits = {(s.dataset, s.parameters["R"]): s for s in parse_tables(PAPER.read_text())}
    lfw = splits[("lfw10", 0.04)]
    assert lfw.class_indices["train"][:5] == [128, 133, 13, 100, 7]
    assert lfw.class_indices["test"][-1] == 102
    emnist = splits[("emnist", 0.96)]
    assert emnist.class_indices["valid"] == [29, 34, 54, 20, 15, 55, 53, 7, 33, 41, 38, 47]


def test_truncated_or_malformed_tables_are_reported():
    header = "Table 8: Taskset partitions for EMNIST.\n\nSetting\tTaskset\tClasses\n"
    train = "D = 0.04\tTrain\t" + ", ".join(str(i) for i in range(38)) + "\n"
    valid = "\tValidation\t" + ", ".join(str(i) for i in range(38, 50)) + "\n"
    test = "\tTest\t" + ", ".join(str(i) for i in range(50, 61)) + "\n"  # one class short
    with pytest.raises(TableParseError, match=r"do not cover 0\.\.61"):
        parse_tables(header + train + valid + test)
    with pytest.raises(TableParseError, match="rows missing"):
        parse_tables(header + train + valid)
    with pytest.raises(TableParseError, match="no 'Taskset partitions' tables"):
        parse_tables("nothing here")


def test_known_conventions_resolve_to_names():
    emnist = load_published("atg/emnist_D0.04")
    assert emnist.has_names()
    assert emnist.train[0] == EMNIST_BYCLASS_NAMES[61] == "z"
    cifar = load_published("atg/cifar100_D0.04")
    assert cifar.train[:2] == ["house", "keyboard"]  # printed indices 37, 39
    lfw = load_published("atg/lfw10_D0.04")
    assert not lfw.has_names()
    people = [f"person_{i:03d}" for i in range(158)]
    named = load_published("atg/lfw10_D0.04", class_names=people)
    assert named.train[0] == "person_128"
    assert named.resolve(people)["train"][:2] == [128, 133]


def test_cifar100_and_emnist_conventions():
    assert len(CIFAR100_FINE_NAMES) == 100 == len(set(CIFAR100_FINE_NAMES))
    assert CIFAR100_FINE_NAMES == sorted(CIFAR100_FINE_NAMES)
    assert len(CIFAR100_COARSE_NAMES) == 20
    assert all(len(m) == 5 for m in CIFAR100_SUPERCLASS_MEMBERS.values())
    assert EMNIST_BYCLASS_NAMES[:3] == ["0", "1", "2"] and EMNIST_BYCLASS_NAMES[10] == "A"
    assert EMNIST_BYCLASS_NAMES[36] == "a" and len(EMNIST_BYCLASS_NAMES) == 62


def test_fc100_file_is_superclass_pure():
    split = load_published("fc100/cifar100")
    assert _sizes(split) == (60, 20, 20)
    for name in ("train", "valid", "test"):
        supers = split.parameters["superclasses"][name]
        members = {c for s in supers for c in CIFAR100_SUPERCLASS_MEMBERS[s]}
        assert set(split.classes(name)) == members


@needs_reference
def test_meta_dataset_files_match_reference(tmp_path):
    assert (
        published_meta_dataset.main(["--reference", str(REFERENCE), "--out-dir", str(tmp_path)])
        == 0
    )
    for path in sorted(tmp_path.glob("*.json")):
        assert path.read_bytes() == (PUBLISHED_DIR / "meta_dataset" / path.name).read_bytes()
    sizes = {
        n: _sizes(load_published(f"meta_dataset/{n}"))
        for n in ("aircraft", "ilsvrc_2012", "omniglot", "mscoco", "vgg_flower")
    }
    assert sizes == {
        "aircraft": (70, 15, 15),
        "ilsvrc_2012": (712, 158, 130),
        "omniglot": (883, 81, 659),
        "mscoco": (0, 40, 40),
        "vgg_flower": (71, 15, 16),
    }
    for flat in sorted((REFERENCE / "splits").glob("*_splits.json")):
        ref = json.loads(flat.read_text())
        ours = load_published("meta_dataset/" + flat.name.removesuffix("_splits.json"))
        assert {s: ours.classes(s) for s in ("train", "valid", "test")} == {
            s: ref[s] for s in ("train", "valid", "test")
        }
        assert ours.source.endswith(flat.name)


@needs_reference
def test_meta_dataset_split_resolves_against_reference_spec():
    spec = json.loads((REFERENCE / "dataset_specs" / "aircraft_dataset_spec.json").read_text())
    names = [spec["class_names"][str(i)] for i in range(len(spec["class_names"]))]
    ids = load_published("meta_dataset/aircraft").resolve(names)
    assert sorted(ids["train"] + ids["valid"] + ids["test"]) == list(range(100))


def test_unknown_published_name():
    with pytest.raises(ValueError, match="no published split 'atg/nope'"):
        load_published("atg/nope")


def test_a_published_split_of_another_dataset_is_refused(tmp_path, capsys):
    """Issue 30: Meta-Dataset's Omniglot split given the embedded glyph dataset's classes
    (other alphabets) wrote real Omniglot names with no word; now one line, nothing written."""
    from splits.make import main as make_main

    names = tmp_path / "names.txt"
    names.write_text("".join(f"Glyph_Script-character{i:02d}\n" for i in range(1, 31)))
    out = tmp_path / "omniglot.json"
    argv = ["--method", "published", "--name", "meta_dataset/omniglot", "--output", str(out)]
    assert make_main([*argv, "--class-names", str(names)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "1623 of its 1623 classes are not classes of --class-names" in err
    assert not out.exists()
    assert make_main(argv) == 0  # without a dataset: the split as published
    assert len(read_split_file(out).train) > 0
