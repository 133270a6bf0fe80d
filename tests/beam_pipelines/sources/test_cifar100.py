"""The CIFAR-100 converter: fine classes, coarse hierarchy, pooled parts, rejects, layouts."""

from __future__ import annotations

import io
import os
import pickle
import tarfile

import numpy as np
import pytest
from PIL import Image

from beam_pipelines.conversion.pipeline import convert
from beam_pipelines.conversion.writer import build_spec
from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.cifar100 import Cifar100Source
from beam_pipelines.verify import format_report, verify_dataset
from episodes.records.dataset_spec import BiLevelHierarchy, Split, load_spec
from episodes.records.record_reader import RecordReader
from tests.fixtures.meta_dataset_checks import digest
from tests.fixtures.raw.cifar100 import write_cifar100_fixture
from tests.fixtures.source_test_case import SourceTestCase


def _source(**options) -> Cifar100Source:
    return Cifar100Source(**options)


def _tar(path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(f"cifar-100-python/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


class _Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


class TestCifar100(SourceTestCase):
    SOURCE = Cifar100Source
    FIXTURE = write_cifar100_fixture
    OPTIONS = {"cifar100_rows_per_unit": 64}
    NUM_CLASSES = 100
    IMAGES_PER_CLASS = 3  # 2 train + 1 test pooled per class
    REJECTED = 1  # the row with an impossible fine label
    IMAGE_FORMAT = "png"
    SPEC_KEYS = ("read_from",)

    def test_fine_classes_coarse_hierarchy_and_counts(self, fixture, converted):
        _, out, report = converted
        spec = load_spec(out)
        assert spec.name == "cifar100" and spec.image_format == "png"
        assert spec.class_names == fixture.fine_names and len(spec.class_names) == 100
        assert spec.class_names[4] == "beaver" and spec.class_names[99] == "worm"
        assert not spec.has_splits
        assert spec.images_per_class == [3] * 100  # 2 train + 1 test pooled per class
        hierarchy = spec.hierarchy
        assert isinstance(hierarchy, BiLevelHierarchy)
        assert hierarchy.superclass_names == fixture.coarse_names
        assert hierarchy.superclass_of == [fixture.coarse_of[n] for n in fixture.fine_names]
        assert [len(hierarchy.classes_of(s)) for s in range(20)] == [5] * 20
        people = fixture.coarse_names.index("people")
        assert [spec.class_names[c] for c in hierarchy.classes_of(people)] == [
            "baby",
            "boy",
            "girl",
            "man",
            "woman",
        ]
        rejected = spec.provenance["rejected"]
        assert len(rejected) == 1 and rejected[0]["path"].endswith(
            f"cifar-100-python/{fixture.corrupt}"
        )
        assert rejected[0]["reason"] == "fine label 100 outside 0..99"
        assert report.images == 300
        verified = verify_dataset(out, progress=False)
        assert verified.ok, format_report(verified)

    def test_records_hold_the_rgb_rows_of_their_class(self, fixture, converted):
        _, out, _ = converted
        reader = RecordReader(out)
        for class_id in (0, 42, 99):
            expected = []  # records are ordered by key: test-NNNNN, then train-NNNNN
            for part in ("test", "train"):
                rows = np.flatnonzero(fixture.fine[part] == class_id)
                expected += [
                    fixture.data[part][r].reshape(3, 32, 32).transpose(1, 2, 0) for r in rows
                ]
            assert reader.num_records(class_id) == len(expected) == 3
            for k, pixels in enumerate(expected):
                image, label = reader.read_example(class_id, k)
                decoded = np.asarray(Image.open(io.BytesIO(image)))
                assert label == class_id and decoded.shape == (32, 32, 3)
                np.testing.assert_array_equal(decoded, pixels)

    def test_extracted_folder_and_rerun_are_byte_identical(
        self, fixture, converted, tmp_path, local_runner
    ):
        _, out, _ = converted
        folder = write_cifar100_fixture(tmp_path / "raw", extracted=True)
        report = convert(_source(), folder.path, tmp_path / "again", local_runner(1))
        assert digest(report.output, spec=False) == digest(out, spec=False)
        assert report.spec.provenance["read_from"] == "folder:cifar-100-python"

    def test_split_fractions_keep_ids_contiguous_and_superclasses_per_split(self, fixture):
        plan = _source(split_fractions=[0.6, 0.2, 0.2], split_seed=1).plan(fixture.path)
        splits = [c.split for c in plan.classes]
        assert [splits.count(s) for s in Split] == [60, 20, 20]
        spec = build_spec(plan, [], [])
        assert spec.classes("train") == list(range(60)) and spec.classes("test") == list(
            range(80, 100)
        )
        hierarchy = spec.hierarchy
        for split in Split:
            supers = {hierarchy.superclass_of[c] for c in spec.classes(split)}
            assert hierarchy.superclasses(split) == sorted(supers)
        assert [plan.classes[i].superclass for i in range(100)] == [
            fixture.coarse_names[fixture.coarse_of[c.name]] for c in plan.classes
        ]

    def test_wrong_layouts_fail_before_the_pipeline(self, fixture, tmp_path):
        with pytest.raises(LayoutError, match="not found"):
            _source().plan(tmp_path / "nope")
        cifar10 = tmp_path / "c10"
        (cifar10 / "cifar-10-batches-py").mkdir(parents=True)
        with pytest.raises(
            LayoutError, match=r"no cifar-100-python.tar.gz or cifar-100-python/ .*this is CIFAR-10"
        ):
            _source().plan(cifar10)
        folder = write_cifar100_fixture(tmp_path / "raw", extracted=True).path
        train = folder.joinpath("train").read_bytes()
        meta10 = pickle.dumps(
            {b"label_names": [b"cat"] * 10, b"fine_label_names": [b"x%d" % i for i in range(10)]}
        )
        _tar(tmp_path / "ten.tar.gz", {"train": train, "test": train, "meta": meta10})
        with pytest.raises(
            LayoutError,
            match=r"meta: 10 fine_label_names; expected 100 distinct names \(CIFAR-10\?\)",
        ):
            _source().plan(tmp_path / "ten.tar.gz")
        _tar(
            tmp_path / "no_test.tar.gz",
            {"train": train, "meta": folder.joinpath("meta").read_bytes()},
        )
        with pytest.raises(LayoutError, match="missing cifar-100-python/test"):
            _source().plan(tmp_path / "no_test.tar.gz")
        folder.joinpath("test").write_bytes(pickle.dumps({b"data": _Exploit()}, protocol=2))
        with pytest.raises(
            LayoutError, match="refusing to load posix.system|refusing to load os.system"
        ):
            _source().plan(folder.parent)


def test_superclass_votes_and_contradicting_rows():
    from beam_pipelines.sources.cifar100 import rejected_rows, superclass_of_fine

    fine = np.array([0, 0, 0, 1, 1, 150])
    coarse = np.array([3, 3, 7, 2, 2, 0])
    superclass = superclass_of_fine([(fine, coarse)])
    assert superclass == {0: 3, 1: 2}
    names = [f"fine{i}" for i in range(100)]
    supers = [f"coarse{i}" for i in range(20)]
    rows = rejected_rows(fine, coarse, superclass, names, supers)
    assert [r for r, _ in rows] == [2, 5]
    assert (
        rows[0][1]
        == "coarse label 7 contradicts fine label 0 (fine0), whose superclass is 3 (coarse3)"
    )
    assert rows[1][1] == "fine label 150 outside 0..99"
