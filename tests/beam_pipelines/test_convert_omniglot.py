"""The Omniglot Beam conversion: layout, split rule, hierarchy, rejects, determinism, errors."""

from __future__ import annotations

import hashlib

import pytest

from beam_pipelines import convert as convert_cli
from beam_pipelines.conversion.pipeline import OutputExistsError, convert
from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.omniglot import OmniglotSource
from beam_pipelines.verify import format_report, verify_dataset
from episodes.records.dataset_spec import BiLevelHierarchy, Split, load_spec
from episodes.records.record_reader import RecordReader
from tests.fixtures.raw.omniglot import write_omniglot_fixture


def _digest(folder) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.suffix in (".tfrecords", ".index")
    }


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    from tests.fixtures.local_runner import make_local_runner

    root = tmp_path_factory.mktemp("raw")
    fixture = write_omniglot_fixture(root)
    out = tmp_path_factory.mktemp("out") / "omniglot"
    report = convert(OmniglotSource(), root, out, make_local_runner(1))
    return fixture, out, report


def test_classes_splits_and_hierarchy(converted):
    fixture, out, report = converted
    spec = load_spec(out)
    assert spec.num_classes == fixture.num_classes == 38
    h = spec.hierarchy
    assert isinstance(h, BiLevelHierarchy)
    # The 5 smallest background alphabets (ties by name) are valid; evaluation is test.
    valid = {h.superclass_names[s] for s in h.superclasses("valid")}
    assert valid == {"Gamma", "Epsilon", "Eta", "Delta", "Zeta"}
    assert {h.superclass_names[s] for s in h.superclasses("train")} == {"Alpha", "Beta", "Theta"}
    assert {h.superclass_names[s] for s in h.superclasses("test")} == {"Omega", "Psi"}
    # Contiguous ids, train < valid < test; train and test alphabets by name, valid smallest first.
    assert spec.classes("train") + spec.classes("valid") + spec.classes("test") == list(range(38))
    assert spec.class_names[0] == "Alpha-character01"
    assert [len(spec.classes(s)) for s in Split] == [18, 13, 7]
    assert spec.image_format == "jpeg"  # the reference's pixels (test_omniglot_polarity)


def test_counts_labels_and_rejected_file(converted):
    fixture, out, report = converted
    spec = load_spec(out)
    assert all(n == fixture.drawers for n in spec.images_per_class)
    assert report.images == 38 * fixture.drawers
    rejected = spec.provenance["rejected"]
    assert len(rejected) == 1 and rejected[0]["path"].endswith(fixture.corrupt)
    assert "not a decodable image" in rejected[0]["reason"]
    assert "rejected" in report.summary() and fixture.corrupt in report.summary()
    reader = RecordReader(out)
    for class_id in (0, 17, 37):
        for k in range(fixture.drawers):
            _, label = reader.read_example(class_id, k)
            assert label == class_id
    verified = verify_dataset(out, progress=False)
    assert verified.ok, format_report(verified)
    assert verified.records == 152


@pytest.mark.slow
def test_rerun_and_two_workers_are_byte_identical(converted, tmp_path):
    from tests.fixtures.local_runner import make_local_runner

    fixture, out, _ = converted
    again = tmp_path / "again"
    convert(OmniglotSource(), fixture.root, again, make_local_runner(2))
    assert _digest(again) == _digest(out)
    assert (again / "dataset_spec.json").read_bytes() == (out / "dataset_spec.json").read_bytes()


def test_zipped_archives_give_the_same_records(tmp_path, local_runner):
    raw = tmp_path / "raw_zip"
    raw.mkdir()
    write_omniglot_fixture(raw, zipped=True)
    folders = tmp_path / "raw_dir"
    folders.mkdir()
    write_omniglot_fixture(folders)
    a = convert(OmniglotSource(), raw, tmp_path / "a", local_runner(1))
    b = convert(OmniglotSource(), folders, tmp_path / "b", local_runner(1))
    assert _digest(a.output) == _digest(b.output)
    assert a.spec.provenance["parts"]["images_background"] == "zip:images_background.zip"


def test_bad_layouts_fail_before_the_pipeline(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert (
        convert_cli.main(
            ["--source", "omniglot", "--input", str(missing), "--output", str(tmp_path / "o")]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert str(missing) in err and "not found" in err and err.count("\n") == 1
    other = tmp_path / "not_omniglot"
    (other / "train" / "n01440764").mkdir(parents=True)
    with pytest.raises(LayoutError, match="missing images_background, images_evaluation"):
        OmniglotSource().plan(other)
    assert (
        convert_cli.main(["--source", "imagenet21k", "--input", str(other), "--output", "x"]) == 2
    )
    assert "unknown --source 'imagenet21k'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_existing_output_refused_and_nothing_half_written(tmp_path, local_runner):
    raw = tmp_path / "raw"
    raw.mkdir()
    write_omniglot_fixture(raw, drawers=2)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("user data")
    with pytest.raises(OutputExistsError, match="pass --overwrite"):
        convert(OmniglotSource(), raw, out, local_runner(1))
    assert (out / "keep.txt").read_text() == "user data"

    class ExplodingSource(OmniglotSource):
        def read_unit(self, unit):
            if unit.key.startswith("Psi"):
                raise RuntimeError("disk failure while reading")
            yield from super().read_unit(unit)

    with pytest.raises(Exception, match="disk failure"):
        convert(ExplodingSource(), raw, out, local_runner(1), overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    report = convert(OmniglotSource(), raw, out, local_runner(1), overwrite=True)
    assert report.spec.total_images == 76 and not (out / "keep.txt").exists()


def test_verify_detects_corruption(tmp_path, local_runner):
    raw = tmp_path / "raw"
    raw.mkdir()
    write_omniglot_fixture(raw, drawers=2)
    out = tmp_path / "out"
    convert(OmniglotSource(), raw, out, local_runner(1))
    records = out / "4.tfrecords"
    data = bytearray(records.read_bytes())
    data[30] ^= 0x01
    records.write_bytes(bytes(data))
    report = verify_dataset(out, progress=False)
    assert not report.ok
    assert any("class 4" in p and "CRC" in p for p in report.problems)
    from beam_pipelines.verify import main as verify_main

    assert verify_main([str(out)]) == 1


def test_list_sources_names_layouts(capsys):
    assert convert_cli.main(["--list-sources"]) == 0
    out = capsys.readouterr().out
    assert "omniglot" in out and "images_background" in out
