"""The ILSVRC-2012 converter on a tiny archive in the distributed layout (outer tar of class
tars): classes, split rule, DAG, RGB storage of the archive's odd files, duplicate removal,
rejects, determinism across runs, workers and layouts, and layout errors before the pipeline."""

from __future__ import annotations

import io
import tarfile

import pytest
from PIL import Image

from beam_pipelines import convert as convert_cli
from beam_pipelines.conversion.pipeline import convert
from beam_pipelines.sources import get_source_class
from beam_pipelines.sources._lib.source_config import ConfigError
from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.ilsvrc import REFERENCE_DATA, IlsvrcSource, load_duplicate_lists
from episodes.hierarchy.imagenet_dag import TEST_ROOT, VALID_ROOT, build_imagenet_hierarchy
from episodes.hierarchy.wordnet import WordNet, read_wordnet, write_imagenet_is_a
from episodes.records.dataset_spec import ALL_SPLITS, DagHierarchy, Split, load_spec
from episodes.records.record_reader import RecordReader
from tests.fixtures.meta_dataset_checks import digest
from tests.fixtures.raw.ilsvrc import (
    CLASSES,
    write_ilsvrc_fixture,
    write_validation_fixture,
)
from tests.fixtures.source_test_case import SourceTestCase


def _source(**options) -> IlsvrcSource:
    options.setdefault("ilsvrc_allow_missing_classes", True)
    return IlsvrcSource(**options)


def _images_in_class_order(fixture) -> list[int]:
    """The fixture's images per class in class-id order: per split, sorted by WordNet id."""
    counts = fixture.expected_images()
    return [
        counts[w] for s in ALL_SPLITS for w in sorted(w for w, sp in CLASSES.items() if sp == s)
    ]


class TestIlsvrc(SourceTestCase):
    SOURCE = IlsvrcSource
    FIXTURE = write_ilsvrc_fixture
    OPTIONS = {"ilsvrc_allow_missing_classes": True}
    DATASET = "ilsvrc_2012"
    CLASSES_PER_SPLIT = (3, 4, 3)
    IMAGES_PER_CLASS = _images_in_class_order
    REJECTED = 1  # the truncated JPEG
    SPEC_KEYS = ("missing_classes", "layout", "duplicates", "wordnet")
    RERUN_WORKERS = 2

    def test_classes_split_rule_and_dag(self, converted):
        fixture, out, _ = converted
        spec = load_spec(out)
        by_split = {s: sorted(w for w, sp in CLASSES.items() if sp == s) for s in ALL_SPLITS}
        # Ids: per split, classes sorted by WordNet id; train < valid < test.
        assert (
            spec.class_names == by_split[Split.TRAIN] + by_split[Split.VALID] + by_split[Split.TEST]
        )
        for split in ALL_SPLITS:
            assert [spec.class_names[i] for i in spec.classes(split)] == by_split[split]
        dag = spec.hierarchy
        assert isinstance(dag, DagHierarchy)
        assert dag.roots(Split.VALID) == [VALID_ROOT] and dag.roots(Split.TEST) == [TEST_ROOT]
        expected = build_imagenet_hierarchy(read_wordnet(), CLASSES)
        for split in ALL_SPLITS:
            assert dag.leaves(split) == by_split[split]
            assert dag.nodes(split) == expected.nodes(split)
        assert len(spec.provenance["missing_classes"]) == 1000 - len(CLASSES)
        assert spec.provenance["layout"] == "tar"

    def test_counts_labels_and_rgb_storage(self, converted):
        fixture, out, report = converted
        spec = load_spec(out)
        expected = fixture.expected_images()
        assert dict(zip(spec.class_names, spec.images_per_class)) == expected
        assert report.images == sum(expected.values())
        reader = RecordReader(out)
        for class_id, wnid in enumerate(spec.class_names):
            for k in range(spec.images_per_class[class_id]):
                data, label = reader.read_example(class_id, k)
                assert label == class_id
                image = Image.open(io.BytesIO(data))
                assert (image.format, image.mode) == ("JPEG", "RGB"), (wnid, k)
        # The CMYK JPEG, the PNG named .JPEG and the greyscale JPEG are all stored.
        for wnid, _ in (fixture.cmyk, fixture.png, fixture.grey):
            assert expected[wnid] == len(fixture.files[wnid])

    def test_corrupt_file_is_rejected_with_its_archive_path(self, converted):
        fixture, out, report = converted
        rejected = load_spec(out).provenance["rejected"]
        wnid, name = fixture.corrupt
        assert len(rejected) == 1
        assert rejected[0]["path"].endswith(f"ILSVRC2012_img_train.tar:{wnid}.tar/{name}")
        assert "not a decodable image" in rejected[0]["reason"]
        assert name in report.summary()

    def test_duplicates_removed_and_counted_per_list(self, converted):
        fixture, out, _ = converted
        duplicates = load_spec(out).provenance["duplicates"]
        lists = load_duplicate_lists()
        # The lists have the paper's 43 / 92 / 286 lines (appendix); an image matching several
        # Caltech images is listed once per match, so the sets are smaller.
        lines = [
            sum(
                1
                for line in (REFERENCE_DATA / name).read_text().splitlines()
                if line.startswith("n")
            )
            for name in lists
        ]
        assert lines == [43, 92, 286]
        assert all(len(entries) <= n for entries, n in zip(lists.values(), lines))
        per_list = {name: len(entries & set(fixture.duplicates)) for name, entries in lists.items()}
        assert duplicates["per_list"] == per_list
        assert per_list["ImageNet_CUBirds_duplicates.txt"] == 1
        assert duplicates["total_removed"] == len(fixture.duplicates) == 3
        assert duplicates["removed"] is True

    def test_keeping_duplicates(self, converted):
        fixture, _, _ = converted
        default = {u.payload[0]: u.payload[-1] for u in _source().plan(fixture.root).units}
        kept = _source(ilsvrc_remove_duplicates=False).plan(fixture.root)
        assert {w: names for w, names in default.items() if names} == {
            wnid: (name,) for wnid, name in fixture.duplicates
        }
        assert all(u.payload[-1] == () for u in kept.units)
        assert kept.provenance["duplicates"]["total_removed"] == 0
        assert kept.provenance["duplicates"]["listed_and_present"] == 3
        # Classes with listed duplicates are listed in planning: exact counts (corrupt included).
        for unit in kept.units:
            wnid = unit.payload[0]
            if wnid in default and default[wnid]:
                assert unit.expected_items == len(fixture.files[wnid])

    def test_extracted_folders_give_the_same_records(self, converted, tmp_path):
        from tests.fixtures.local_runner import make_local_runner

        fixture, out, _ = converted
        folders = write_ilsvrc_fixture(tmp_path / "raw", layout="folders")
        result = tmp_path / "out"
        convert(_source(), folders.root, result, make_local_runner(1))
        assert digest(result, spec=False) == digest(out, spec=False)
        spec = load_spec(result)
        assert spec.provenance["layout"] == "folders"
        wnid, name = fixture.corrupt
        assert spec.provenance["rejected"][0]["path"].endswith(f"train/{wnid}/{name}")

    def test_damaged_class_tar_is_reported_not_fatal(self, converted, tmp_path):
        from tests.fixtures.local_runner import make_local_runner

        fixture, out, _ = converted
        tars = write_ilsvrc_fixture(tmp_path / "raw", layout="tars")
        damaged = tars.root / "n01443537.tar"
        data = damaged.read_bytes()
        damaged.write_bytes(data[: 512 + 300])  # first header and part of its file
        result = tmp_path / "out"
        report = convert(_source(), tars.root, result, make_local_runner(1))
        spec = load_spec(result)
        assert spec.provenance["layout"] == "tars"
        damaged_id = spec.class_id("n01443537")
        assert spec.images_per_class[damaged_id] == 0
        reasons = [r["reason"] for r in report.rejected if r["path"].startswith(str(damaged))]
        assert any("unreadable class archive" in r for r in reasons)
        # Every other class is converted exactly as from the outer tar.
        ours, theirs = digest(result, spec=False), digest(out, spec=False)
        changed = {k for k in ours if ours[k] != theirs[k] and k.endswith(".tfrecords")}
        assert changed == {f"{damaged_id}.tfrecords"}

    def test_imagenet_is_a_files_instead_of_wordnet(self, converted, tmp_path):
        fixture, out, _ = converted
        wordnet = read_wordnet()
        keep = wordnet.ancestors(CLASSES) | set(CLASSES)
        subset = WordNet(
            words={w: wordnet.words[w] for w in keep},
            parents={w: p for w, p in wordnet.parents.items() if w in keep},
        )
        is_a, words = tmp_path / "wordnet.is_a.txt", tmp_path / "words.txt"
        write_imagenet_is_a(subset, is_a, words)
        plan = _source(ilsvrc_is_a=str(is_a), ilsvrc_words=str(words)).plan(fixture.root)
        assert plan.dag.split_nodes == load_spec(out).hierarchy.split_nodes
        assert plan.provenance["wordnet"].startswith(str(is_a))

    def test_all_classes_required_by_default(self, converted, tmp_path):
        fixture, _, _ = converted
        output = tmp_path / "never"
        from tests.fixtures.local_runner import make_local_runner

        with pytest.raises(LayoutError, match=r"990 of the 1,000 ILSVRC-2012 classes are missing"):
            convert(IlsvrcSource(), fixture.root, output, make_local_runner(1))
        assert not output.exists() and not list(tmp_path.iterdir())

    def test_hierarchy_option_errors(self, converted, tmp_path):
        fixture, _, _ = converted
        with pytest.raises(
            ConfigError, match="--ilsvrc-is-a and --ilsvrc-words must be given together"
        ):
            _source(ilsvrc_is_a=str(tmp_path / "is_a.txt"))
        with pytest.raises(LayoutError, match=f"{tmp_path}: no data.noun found"):
            _source(ilsvrc_wordnet=str(tmp_path)).plan(fixture.root)

    def test_fixture_is_the_distributed_layout(self, converted):
        fixture, _, _ = converted
        with tarfile.open(fixture.root / "ILSVRC2012_img_train.tar") as outer:
            names = outer.getnames()
            assert names == [f"{w}.tar" for w in sorted(CLASSES)]
            inner = tarfile.open(fileobj=outer.extractfile("n01440764.tar"))
            assert inner.getnames() == fixture.files["n01440764"]


def test_registered_under_its_name():
    assert get_source_class("ilsvrc_2012") is IlsvrcSource


@pytest.mark.parametrize("as_tar", [False, True])
def test_validation_set_is_refused(tmp_path, as_tar):
    root = write_validation_fixture(tmp_path / "val", as_tar=as_tar)
    expected = "this is the validation set" if as_tar else "this is the validation/test set"
    with pytest.raises(LayoutError, match=expected):
        _source().plan(root)
    if as_tar:
        with pytest.raises(LayoutError, match="ILSVRC2012_img_val.tar: this is the validation"):
            _source().plan(root / "ILSVRC2012_img_val.tar")


def test_validation_tar_under_the_training_name_is_refused(tmp_path):
    root = write_validation_fixture(tmp_path / "val", as_tar=True)
    (root / "ILSVRC2012_img_val.tar").rename(root / "ILSVRC2012_img_train.tar")
    with pytest.raises(LayoutError, match=r"ILSVRC2012_val_00000001.JPEG .*validation/test set"):
        _source().plan(root)


def test_validation_images_sorted_into_class_folders_are_refused(tmp_path):
    folder = tmp_path / "train" / "n01440764"
    write_validation_fixture(folder)
    with pytest.raises(LayoutError, match=f"{folder}: holds ILSVRC2012_val_00000001.JPEG"):
        _source().plan(tmp_path)


def test_other_layout_errors(tmp_path):
    with pytest.raises(LayoutError, match=f"{tmp_path / 'nope'}: not found; expected"):
        _source().plan(tmp_path / "nope")
    (tmp_path / "readme.txt").write_text("x")
    with pytest.raises(LayoutError, match=r"no ILSVRC-2012 training data \(found \['readme.txt'\]"):
        _source().plan(tmp_path)
    (tmp_path / "train" / "n99999999").mkdir(parents=True)
    (tmp_path / "train" / "n01440764").mkdir()
    with pytest.raises(LayoutError, match=r"1 synsets that are not ILSVRC-2012 classes.*n99999999"):
        _source().plan(tmp_path)
    (tmp_path / "ILSVRC2012_img_train.tar").write_bytes(b"not a tar at all" * 64)
    with pytest.raises(LayoutError, match="ILSVRC2012_img_train.tar: not a readable tar archive"):
        _source().plan(tmp_path)


def test_cli_lists_the_source_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        convert_cli.main(["--source", "ilsvrc_2012", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in (
        "--ilsvrc-remove-duplicates",
        "--no-ilsvrc-remove-duplicates",
        "--ilsvrc-wordnet",
        "--ilsvrc-is-a",
        "--ilsvrc-words",
        "--ilsvrc-allow-missing-classes",
    ):
        assert option in text


def test_all_1000_classes_plan_the_reference_spec(tmp_path, reference_data):
    reference = load_spec(reference_data / "dataset_specs" / "ilsvrc_2012_dataset_spec.json")
    for wnid in reference.class_names:
        (tmp_path / "train" / wnid).mkdir(parents=True)
    plan = IlsvrcSource().plan(tmp_path)
    assert [c.name for c in plan.classes] == reference.class_names
    for split in ALL_SPLITS:
        assert [i for i, c in enumerate(plan.classes) if c.split == split] == reference.classes(
            split
        )
        assert plan.dag.nodes(split) == reference.hierarchy.nodes(split)
    assert plan.provenance["missing_classes"] == []
