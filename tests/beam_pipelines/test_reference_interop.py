"""Our dataset_spec.json is read by the reference Meta-Dataset loader (its top-level keys,
value types and id conventions equal the shipped reference specs'), our loader reads it, the
reference's own specs and our previous format, and a reference-style folder verifies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from beam_pipelines import verify as verify_cli
from beam_pipelines.sources.dtd import DTDSource
from beam_pipelines.sources.ilsvrc import IlsvrcSource
from beam_pipelines.sources.omniglot import OmniglotSource
from beam_pipelines.verify import format_report, verify_dataset
from episodes.records.dataset_spec import (
    SPEC_FORMAT,
    BiLevelHierarchy,
    DagHierarchy,
    DatasetSpec,
    Split,
    load_spec,
)
from episodes.records.meta_dataset_spec import (
    BILEVEL,
    FLAT,
    HIERARCHICAL,
    REFERENCE_KEYS,
    reference_class,
    reference_fields,
)
from episodes.records.record_reader import RecordReader
from tests.fixtures import reference_loader
from tests.fixtures.meta_dataset_checks import convert_source
from tests.fixtures.paths import REFERENCE_DATA
from tests.fixtures.raw.dtd import write_dtd_fixture
from tests.fixtures.raw.ilsvrc import write_ilsvrc_fixture
from tests.fixtures.raw.omniglot import write_omniglot_fixture
from tests.fixtures.source_test_case import assert_reference_reads
from tests.fixtures.unwritable_folder import read_only

# This project's own fields, written beside the reference's (name, file_pattern are shared).
OWN_KEYS = {
    "format",
    "image_format",
    "num_classes",
    "total_images",
    "splits",
    "classes",
    "hierarchy",
    "provenance",
}
SHIPPED = sorted(
    p.name.removesuffix("_dataset_spec.json")
    for p in (REFERENCE_DATA / "dataset_specs").glob("*_dataset_spec.json")
)


def _shipped(reference_data: Path, name: str) -> dict:
    return json.loads((reference_data / "dataset_specs" / f"{name}_dataset_spec.json").read_text())


def _key_kind(key: str) -> str:
    if key in ("TRAIN", "VALID", "TEST"):
        return "split"
    if key.isdigit():
        return "id"
    if key[:1] == "n" and key[1:].isdigit():
        return "wnid"
    return "other"


def _shape(value, depth: int = 0):
    """A value's structure: type, key kinds of dicts, element shapes (the first few)."""
    if isinstance(value, dict):
        kinds = sorted({_key_kind(k) for k in value})
        inner = sorted({repr(_shape(v, depth + 1)) for v in list(value.values())[:50]})
        return ("dict", tuple(kinds), tuple(inner))
    if isinstance(value, list):
        return ("list", tuple(sorted({repr(_shape(v, depth + 1)) for v in value[:50]})))
    return type(value).__name__


def assert_reference_layout(ours: dict, shipped: dict) -> None:
    """Same `__class__`, exactly the shipped top-level keys beside our own, the same value
    structure per key, and the reference's id conventions (split names, ids 0..N-1)."""
    assert ours["__class__"] == shipped["__class__"]
    assert set(ours) - OWN_KEYS == set(shipped)
    assert list(ours)[: len(shipped)] == list(shipped)  # the reference's keys first, its order
    for key, value in shipped.items():
        assert _shape(ours[key]) == _shape(value), key
    for key in ("class_names", "classes_per_superclass", "superclass_names"):
        if key in shipped:
            assert list(ours[key]) == [str(i) for i in range(len(ours[key]))], key
    for key in ("classes_per_split", "superclasses_per_split", "split_subgraphs"):
        if key in shipped:
            assert list(ours[key]) == ["TRAIN", "VALID", "TEST"], key


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_reference_specs_are_rewritten_exactly(reference_data, name):
    """Loading a shipped reference spec and writing its reference view gives the shipped
    JSON back (only `path` differs): our writer follows every reference convention."""
    shipped = _shipped(reference_data, name)
    written = reference_fields(
        load_spec(reference_data / "dataset_specs" / f"{name}_dataset_spec.json")
    )
    assert list(written) == list(shipped)
    for key, value in shipped.items():
        if key == "path":
            assert written[key] == "."
        elif key == "split_subgraphs":

            def by_id(graph):
                return {
                    n["wn_id"]: (n["words"], sorted(n["children_ids"]), sorted(n["parents_ids"]))
                    for n in graph
                }

            assert {s: by_id(g) for s, g in written[key].items()} == {
                s: by_id(g) for s, g in value.items()
            }
        else:
            assert written[key] == value, key


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Omniglot, ILSVRC and DTD fixtures converted with the real Beam pipeline."""
    raw = tmp_path_factory.mktemp("raw")
    out = tmp_path_factory.mktemp("out")
    omniglot = write_omniglot_fixture(raw / "omniglot_raw", drawers=2)
    ilsvrc = write_ilsvrc_fixture(raw / "ilsvrc_raw", images_per_class=1)
    dtd = write_dtd_fixture(raw / "dtd_raw", images_per_class=1)
    convert_source(OmniglotSource, omniglot.root, out / "omniglot")
    convert_source(
        IlsvrcSource, ilsvrc.root, out / "ilsvrc_2012", ilsvrc_allow_missing_classes=True
    )
    convert_source(DTDSource, dtd.root, out / "dtd")
    return out


@pytest.mark.parametrize(
    "name, kind", [("omniglot", BILEVEL), ("ilsvrc_2012", HIERARCHICAL), ("dtd", FLAT)]
)
def test_converted_spec_has_the_shipped_reference_layout(converted, reference_data, name, kind):
    ours = json.loads((converted / name / "dataset_spec.json").read_text())
    assert ours["__class__"] == kind and ours["format"] == SPEC_FORMAT
    assert_reference_layout(ours, _shipped(reference_data, name))
    assert ours["path"] == "." and ours["file_pattern"] == "{}.tfrecords"


@pytest.mark.parametrize("name", ["omniglot", "ilsvrc_2012", "dtd"])
def test_reference_loader_and_ours_read_the_converted_folder(converted, name):
    assert_reference_reads(converted / name)
    spec = load_spec(converted / name)
    assert spec.source_format == "fewshot-tasksets" and spec.provenance["source"] == name


def test_old_reference_loader_failure_is_gone(converted, tmp_path):
    """The previous format (our fields only) is what the reference could not read."""
    raw = json.loads((converted / "dtd" / "dataset_spec.json").read_text())
    old = {k: v for k, v in raw.items() if k in OWN_KEYS | {"name", "file_pattern"}}
    old["format"] = "fewshot-tasksets.dataset_spec/1"
    (tmp_path / "dataset_spec.json").write_text(json.dumps(old))
    with pytest.raises(AttributeError, match="_replace"):
        reference_loader.load_dataset_spec(tmp_path)
    # ... and our loader still reads it, to the same spec as the new file.
    assert load_spec(tmp_path).to_json() == load_spec(converted / "dtd").to_json()


PREVIOUS_FORMAT = {
    "format": "fewshot-tasksets.dataset_spec/1",
    "name": "toy",
    "image_format": "png",
    "file_pattern": "{}.tfrecords",
    "num_classes": 3,
    "total_images": 9,
    "splits": {"train": [0], "valid": [1], "test": [2]},
    "classes": [
        {"id": 0, "name": "a-1", "images": 2},
        {"id": 1, "name": "b-1", "images": 3},
        {"id": 2, "name": "c-1", "images": 4},
    ],
    "hierarchy": {
        "type": "bilevel",
        "superclasses": [
            {"id": 0, "name": "a", "classes": [0]},
            {"id": 1, "name": "b", "classes": [1]},
            {"id": 2, "name": "c", "classes": [2]},
        ],
        "superclass_splits": {"train": [0], "valid": [1], "test": [2]},
    },
    "provenance": {"source": "omniglot", "converter_version": "1"},
}


def test_previous_format_file_still_loads(tmp_path):
    (tmp_path / "dataset_spec.json").write_text(json.dumps(PREVIOUS_FORMAT, indent=1))
    spec = load_spec(tmp_path)
    assert spec.source_format == "fewshot-tasksets"
    assert spec.class_names == ["a-1", "b-1", "c-1"] and spec.images_per_class == [2, 3, 4]
    assert spec.classes("valid") == [1] and spec.image_format == "png"
    assert spec.hierarchy.superclass_names == ["a", "b", "c"]
    assert spec.provenance["converter_version"] == "1"
    # Saved again it gains the reference's keys (a bi-level spec) and reads back the same.
    spec.save(tmp_path / "again.json")
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["__class__"] == BILEVEL and again["format"] == SPEC_FORMAT
    assert again["superclasses_per_split"] == {"TRAIN": 1, "VALID": 1, "TEST": 1}
    assert load_spec(tmp_path / "again.json").to_json() == again


def test_interleaved_superclasses_are_written_flat_with_our_hierarchy_kept(tmp_path):
    """CIFAR-100 keeps its fine-label ids, so its superclasses interleave: the reference's
    bi-level layout cannot say that, so the reference reads a flat spec; ours keeps both."""
    spec = DatasetSpec(
        "cifar-like",
        ["apple", "bee", "pear", "wasp"],
        [5, 5, 5, 5],
        split_classes={Split.TRAIN: [0, 1], Split.VALID: [2], Split.TEST: [3]},
        hierarchy=BiLevelHierarchy(["fruit", "insect"], [0, 1, 0, 1]),
    )
    assert reference_class(spec) == FLAT
    spec.save(tmp_path)
    assert_reference_reads(tmp_path)
    assert load_spec(tmp_path).hierarchy.superclass_of == [0, 1, 0, 1]
    # Contiguous superclasses in split order are bi-level.
    grouped = DatasetSpec(
        "grouped",
        ["apple", "pear", "bee", "wasp"],
        [5, 5, 5, 5],
        split_classes={Split.TRAIN: [0, 1], Split.VALID: [2], Split.TEST: [3]},
        hierarchy=BiLevelHierarchy(["fruit", "insect"], [0, 0, 1, 1]),
    )
    assert reference_class(grouped) == FLAT  # 'insect' is in two splits
    grouped.split_classes = {Split.TRAIN: [0, 1], Split.VALID: [], Split.TEST: [2, 3]}
    assert reference_class(grouped) == BILEVEL


def test_spec_without_split_gives_the_reference_empty_splits(tmp_path):
    spec = DatasetSpec("nosplit", ["x", "y"], [3, 4])
    fields = reference_fields(spec)
    assert fields["__class__"] == FLAT
    assert fields["classes_per_split"] == {"TRAIN": 0, "VALID": 0, "TEST": 0}
    assert list(fields) == list(REFERENCE_KEYS[FLAT])
    spec.save(tmp_path)
    ref = reference_loader.load_dataset_spec(tmp_path)
    assert ref.class_names == {0: "x", 1: "y"}
    assert load_spec(tmp_path).split_classes is None


def test_dag_spec_records_spanned_images_per_node(converted):
    spec = load_spec(converted / "ilsvrc_2012")
    assert isinstance(spec.hierarchy, DagHierarchy)
    fields = reference_fields(spec)
    for split in Split:
        root = spec.hierarchy.roots(split)[0]
        assert fields["images_per_class"][split.name][root] == sum(
            spec.images_per_class[c] for c in spec.classes(split)
        )


def _reference_copy(converted: Path, name: str, target: Path) -> dict[str, bytes]:
    """Copy a converted folder as the reference tool would have written it: its spec keys
    only, no `.index` files. Returns the converter's index files, by name."""
    target.mkdir(parents=True)
    indexes = {}
    for path in sorted((converted / name).iterdir()):
        if path.suffix == ".index":
            indexes[path.name] = path.read_bytes()
        elif path.suffix == ".tfrecords":
            shutil.copyfile(path, target / path.name)
    raw = json.loads((converted / name / "dataset_spec.json").read_text())
    kept = {k: v for k, v in raw.items() if k not in OWN_KEYS}
    (target / "dataset_spec.json").write_text(json.dumps(kept, indent=2))
    return indexes


def test_verify_passes_on_a_reference_folder_without_index_files(converted, tmp_path, capsys):
    folder = tmp_path / "dtd"
    originals = _reference_copy(converted, "dtd", folder)
    assert load_spec(folder).source_format == "meta-dataset"
    report = verify_dataset(folder, progress=False, index_cache_dir=tmp_path / "cache")
    assert report.ok, format_report(report)
    assert report.unindexed == list(range(47)) and report.records == 47
    assert "47 classes have no .index file" in format_report(report)
    assert not list(folder.glob("*.index")) and not (tmp_path / "cache").exists()
    # The CLI says the same and exits 0.
    assert verify_cli.main([str(folder), "--index-cache-dir", str(tmp_path / "cache")]) == 0
    assert "OK: CRCs, labels" in capsys.readouterr().out
    # --write-index writes exactly the indexes the converter wrote, then they are checked.
    assert verify_cli.main([str(folder), "--write-index"]) == 0
    assert {p.name: p.read_bytes() for p in folder.glob("*.index")} == originals
    again = verify_dataset(folder, progress=False)
    assert again.ok and again.unindexed == [] and "index offsets" in format_report(again)


def test_verify_a_read_only_reference_folder_keeps_indexes_in_the_cache(converted, tmp_path):
    folder = tmp_path / "omniglot"
    originals = _reference_copy(converted, "omniglot", folder)
    cache = tmp_path / "index-cache"
    with read_only(folder):
        report = verify_dataset(folder, progress=False, write_index=True, index_cache_dir=cache)
        assert report.ok, format_report(report)
        assert len(report.indexes_written) == len(originals)
        assert all(cache in p.parents for p in report.indexes_written)
        # The reader finds them there: no class is unindexed any more, and they agree.
        again = verify_dataset(folder, progress=False, index_cache_dir=cache)
        assert again.ok and again.unindexed == []
        reader = RecordReader(folder, index_cache_dir=cache)
        assert reader.num_records(0) == load_spec(folder).images_per_class[0]
    assert not list(folder.glob("*.index"))
    cached = {p.name: p.read_bytes() for p in cache.rglob("*.index")}
    assert cached == originals
    # A cached index that disagrees with its records is a problem, named.
    first = next(p for p in cache.rglob("1.index"))
    first.write_bytes(originals["0.index"])
    bad = verify_dataset(folder, progress=False, index_cache_dir=cache)
    assert not bad.ok and any("class 1" in p for p in bad.problems), bad.problems
