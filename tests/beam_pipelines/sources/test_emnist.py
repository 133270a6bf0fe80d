"""The EMNIST converter: splits, class names, counts, orientation, truncated files, layouts."""

from __future__ import annotations

import gzip
import io
import shutil
import struct

import numpy as np
import pytest
from PIL import Image

from beam_pipelines import convert as convert_cli
from beam_pipelines.conversion.pipeline import convert
from beam_pipelines.sources._lib.source_config import ConfigError
from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.emnist import EmnistSource
from beam_pipelines.verify import format_report, verify_dataset
from episodes.records.dataset_spec import Split, load_spec
from episodes.records.record_reader import RecordReader
from tests.fixtures.meta_dataset_checks import digest
from tests.fixtures.raw.emnist import write_emnist_fixture
from tests.fixtures.source_test_case import SourceTestCase


def _source(**options) -> EmnistSource:
    return EmnistSource(**options)


def _loose_copy(tmp_path, split: str):
    folder = tmp_path / f"only_{split}"
    folder.mkdir()
    loose = tmp_path / "loose_src"
    if not loose.exists():
        write_emnist_fixture(loose, zipped=False)
    for path in (loose / "gzip").glob(f"emnist-{split}-*"):
        shutil.copy(path, folder / path.name)
    return folder


def _shift_labels(path, shift: int) -> bytes:
    """The labels file at `path` with every label moved up by `shift`."""
    raw = gzip.decompress(path.read_bytes())
    labels = np.frombuffer(raw[8:], dtype=np.uint8) + np.uint8(shift)
    return gzip.compress(raw[:8] + labels.tobytes())


class TestEmnist(SourceTestCase):
    SOURCE = EmnistSource
    FIXTURE = write_emnist_fixture
    OPTIONS = {"emnist_rows_per_unit": 40}  # several units per file: workers seek in the gzip
    NUM_CLASSES = 62
    IMAGES_PER_CLASS = staticmethod(lambda fixture: fixture.counts("byclass"))
    # every row of the cut test file past what decompresses
    REJECTED = staticmethod(lambda f: len(f.labels["byclass"]["test"]) - f.readable_rows)
    IMAGE_FORMAT = "png"
    SPEC_KEYS = ("rejected_count",)
    RERUN_WORKERS = 2

    def test_byclass_classes_counts_and_truncated_rows(self, fixture, converted):
        _, out, report = converted
        spec = load_spec(out)
        assert spec.name == "emnist" and spec.image_format == "png"
        expected_names = [chr(c) for c in range(48, 58)] + [chr(c) for c in range(65, 91)]
        expected_names += [chr(c) for c in range(97, 123)]
        assert spec.class_names == expected_names and spec.num_classes == 62
        assert not spec.has_splits and spec.hierarchy is None
        assert spec.images_per_class == fixture.counts("byclass")
        # The cut test images file: every row past what decompresses is listed, none silently lost.
        total_test = len(fixture.labels["byclass"]["test"])
        missing = total_test - fixture.readable_rows
        assert 0 < missing < total_test
        rejected = spec.provenance["rejected"]
        assert len(rejected) == missing == report.spec.provenance["rejected_count"]
        rows = sorted(int(r["path"].rsplit("[", 1)[1].rstrip("]")) for r in rejected)
        assert rows == list(range(fixture.readable_rows, total_test))
        assert all(fixture.corrupt in r["path"] and "row" in r["reason"] for r in rejected)
        assert report.images == sum(fixture.counts("byclass"))
        verified = verify_dataset(out, progress=False)
        assert verified.ok, format_report(verified)

    def test_records_are_upright_with_class_labels(self, fixture, converted):
        _, out, _ = converted
        reader = RecordReader(out)
        for class_id in (0, 10, 36, 61):
            # Records are ordered by key: test-NNNNNNN before train-NNNNNNN, rows ascending.
            expected = []
            for part in ("test", "train"):
                labels = fixture.labels["byclass"][part]
                rows = np.flatnonzero(labels == class_id)  # byclass raw labels start at 0
                if part == "test":
                    rows = rows[rows < fixture.readable_rows]
                expected += [fixture.upright["byclass"][part][r] for r in rows]
            assert reader.num_records(class_id) == len(expected)
            for k, pixels in enumerate(expected):
                image, label = reader.read_example(class_id, k)
                assert label == class_id
                decoded = np.asarray(Image.open(io.BytesIO(image)))
                assert decoded.shape == (28, 28)
                np.testing.assert_array_equal(decoded, pixels)

    def test_letters_split_train_part_only(self, fixture, tmp_path, local_runner):
        report = convert(
            _source(emnist_split="letters", emnist_parts="train"),
            fixture.path,
            tmp_path / "letters",
            local_runner(1),
        )
        spec = report.spec
        assert spec.name == "emnist_letters"
        assert spec.class_names == [chr(c) for c in range(65, 91)]  # raw labels 1..26 -> 'A'..'Z'
        assert spec.images_per_class == fixture.counts("letters", parts=("train",))
        assert spec.provenance["raw_labels"]["A"] == 1 and spec.provenance["parts"] == ["train"]
        assert spec.provenance["rejected_count"] == 0

    def test_loose_files_match_the_zip_and_cli_options(self, fixture, tmp_path, local_runner):
        loose_root = tmp_path / "loose"
        write_emnist_fixture(loose_root, zipped=False)
        assert (
            convert_cli.main(
                [
                    "--source",
                    "emnist",
                    "--input",
                    str(loose_root),
                    "--output",
                    str(tmp_path / "a"),
                    "--emnist-split",
                    "digits",
                ]
            )
            == 0
        )
        zipped = convert(
            _source(emnist_split="digits"), fixture.root, tmp_path / "b", local_runner(1)
        )
        assert digest(tmp_path / "a", spec=False) == digest(zipped.output, spec=False)
        spec = load_spec(tmp_path / "a")
        assert spec.class_names == list("0123456789") and spec.name == "emnist_digits"
        assert spec.provenance["files"]["train-images-idx3"].endswith(
            "gzip/emnist-digits-train-images-idx3-ubyte.gz"
        )

    def test_split_fractions_give_contiguous_seeded_splits(self, fixture):
        options = dict(split_fractions=[0.6, 0.2, 0.2], split_seed=3)
        plan = _source(**options).plan(fixture.root)
        splits = [c.split for c in plan.classes]
        counts = [splits.count(s) for s in (Split.TRAIN, Split.VALID, Split.TEST)]
        assert sum(counts) == 62 and counts[1] == counts[2] == 12
        order = {Split.TRAIN: 0, Split.VALID: 1, Split.TEST: 2}
        assert [order[s] for s in splits] == sorted(order[s] for s in splits)
        again = _source(**options).plan(fixture.root)
        assert [c.name for c in again.classes] == [c.name for c in plan.classes]
        other = _source(split_fractions=[0.6, 0.2, 0.2], split_seed=4).plan(fixture.root)
        assert [c.name for c in other.classes] != [c.name for c in plan.classes]
        with pytest.raises(
            ConfigError, match="--split-fractions 0.5 0.2 0.2: fractions must sum to 1"
        ):
            _source(split_fractions=[0.5, 0.2, 0.2])

    def test_wrong_layouts_fail_before_the_pipeline(self, fixture, tmp_path, capsys):
        digits = _loose_copy(tmp_path, "digits")
        # A file of another split.
        with pytest.raises(
            LayoutError, match=r"split 'digits'; expected the files of split 'byclass'"
        ):
            _source().plan(digits / "emnist-digits-train-images-idx3-ubyte.gz")
        # A folder without the requested split names what it found.
        with pytest.raises(
            LayoutError, match=r"no files of EMNIST split 'byclass' \(found splits: digits\)"
        ):
            _source().plan(digits)
        # Labels of another split (10..19) in files named as this split's.
        for part in ("train", "test"):
            labels_path = digits / f"emnist-digits-{part}-labels-idx1-ubyte.gz"
            labels_path.write_bytes(_shift_labels(labels_path, 10))
        with pytest.raises(
            LayoutError, match="labels outside 0..9; expected the labels of split 'digits'"
        ):
            _source(emnist_split="digits").plan(digits)
        # Label and image counts that differ.
        mnist = _loose_copy(tmp_path, "mnist")
        labels_path = mnist / "emnist-mnist-test-labels-idx1-ubyte.gz"
        labels = gzip.decompress(labels_path.read_bytes())[8:]
        labels_path.write_bytes(
            gzip.compress(struct.pack(">II", 2049, len(labels) - 1) + labels[:-1])
        )
        with pytest.raises(
            LayoutError, match="labels, but .* holds .* images; expected equal counts"
        ):
            _source(emnist_split="mnist").plan(mnist)
        # A mapping of another split.
        balanced = _loose_copy(tmp_path, "balanced")
        shutil.copy(
            tmp_path / "loose_src" / "gzip" / "emnist-digits-mapping.txt",
            balanced / "emnist-balanced-mapping.txt",
        )
        with pytest.raises(LayoutError, match=r"\(10 classes\); expected 0..46 \(47 classes\)"):
            _source(emnist_split="balanced").plan(balanced)
        # Missing input through the CLI: one line, exit status 2, nothing written.
        missing = tmp_path / "nope"
        code = convert_cli.main(
            ["--source", "emnist", "--input", str(missing), "--output", str(tmp_path / "o")]
        )
        err = capsys.readouterr().err
        assert code == 2 and str(missing) in err and "not found" in err and err.count("\n") == 1
        assert not (tmp_path / "o").exists()
