"""The shared source test, as TFDS's `DatasetBuilderTestCase`: a source's test declares its
source, its raw fixture (tests/raw_fixtures/<name>.py) and the facts the conversion must show;
the harness converts the fixture once per class with a real Beam DirectRunner pipeline and
checks the spec, the records and the index against the declaration, plus what every source
must pass: the reference Meta-Dataset loader reads the spec, no record is lost (every record
in the files is counted, every input the fixture made unreadable is rejected by path), and a
second conversion (RERUN_WORKERS workers) writes the same bytes.

    class TestDtd(SourceTestCase):
        SOURCE = DTDSource
        FIXTURE = functools.partial(write_dtd_fixture, images_per_class=2)
        CLASSES_PER_SPLIT = (33, 7, 7)
        IMAGES_PER_CLASS = 2
        REJECTED = 2
        REFERENCE_SPEC = "dtd"

Source-specific tests go in the same class and take the `fixture` (what FIXTURE returned) and
`converted` (`fixture, out, report = converted`) fixtures, so nothing is converted twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from beam_pipelines.conversion.pipeline import ConversionReport
from beam_pipelines.sources.base import Source
from beam_pipelines.verify import format_report, verify_dataset
from episodes.records.dataset_spec import DatasetSpec, Split, load_spec
from episodes.records.record_reader import RecordReader
from episodes.records.tfrecord_io import iter_records
from tests import reference_loader
from tests.meta_dataset_checks import convert_source, digest

SPLIT_NAMES = ("train", "valid", "test")


@dataclasses.dataclass
class Converted:
    """The raw fixture, the output folder and the conversion report (unpacks as a triple)."""

    fixture: Any
    out: Path
    report: ConversionReport

    def __iter__(self) -> Iterator[Any]:
        return iter((self.fixture, self.out, self.report))

    @property
    def spec(self) -> DatasetSpec:
        return load_spec(self.out)


class SourceTestCase:
    """Subclass as `Test<Name>` and declare the class attributes below (see the module doc)."""

    SOURCE: ClassVar[type[Source]]
    # Writes the raw fixture under a folder and returns it (a RawFixture or the source's own).
    FIXTURE: ClassVar[Callable[[Path], Any]]
    INPUT: ClassVar[str] = "root"  # the fixture's attribute naming what is converted
    OPTIONS: ClassVar[Mapping[str, Any]] = {}  # typed source options
    DATASET: ClassVar[str | None] = None  # the spec's name (default: the source's name)
    # Classes per train / valid / test; None: no fixed split, NUM_CLASSES classes.
    CLASSES_PER_SPLIT: ClassVar[tuple[int, int, int] | None] = None
    NUM_CLASSES: ClassVar[int | None] = None
    # Images per class: one number for all, a list in class-id order, a function of the
    # fixture giving that list, or None to take the fixture's `images_per_class` (a
    # RawFixture's {name: count}).
    IMAGES_PER_CLASS: ClassVar[int | Sequence[int] | Callable[[Any], Sequence[int]] | None] = None
    TOTAL_IMAGES: ClassVar[int | None] = None
    # Inputs the conversion must reject (each listed in the spec), or a function of the fixture.
    REJECTED: ClassVar[int | Callable[[Any], int]] = 0
    IMAGE_FORMAT: ClassVar[str | None] = None
    SPEC_KEYS: ClassVar[Sequence[str]] = ()  # provenance keys the spec must hold
    REFERENCE_SPEC: ClassVar[str | None] = None  # a shipped Meta-Dataset spec to equal
    RERUN_WORKERS: ClassVar[int] = 1

    @classmethod
    def convert_fixture(cls, fixture: Any, out: Path, workers: int = 1) -> ConversionReport:
        return convert_source(
            cls.SOURCE, getattr(fixture, cls.INPUT), out, workers=workers, **cls.OPTIONS
        )

    @pytest.fixture(scope="class")
    def fixture(self, tmp_path_factory) -> Any:
        return type(self).FIXTURE(tmp_path_factory.mktemp("raw"))

    @pytest.fixture(scope="class")
    def converted(self, fixture, tmp_path_factory) -> Converted:
        cls = type(self)
        out = tmp_path_factory.mktemp("out") / (cls.DATASET or cls.SOURCE.name)
        return Converted(fixture, out, cls.convert_fixture(fixture, out))

    # ------------------------------------------------------------------ the declaration

    def expected_images_per_class(self, converted: Converted) -> list[int]:
        declared, spec = type(self).IMAGES_PER_CLASS, converted.spec
        if declared is None:
            counts = converted.fixture.images_per_class
            return [counts[name] for name in spec.class_names]
        if isinstance(declared, int):
            return [declared] * spec.num_classes
        if callable(declared):
            return list(declared(converted.fixture))
        return list(declared)

    def test_spec_matches_the_declaration(self, converted, request):
        """Name, classes per split, images per class, format and provenance keys as declared;
        a Meta-Dataset source's class ids, names and splits equal the shipped reference spec's
        (from the published split list)."""
        cls, spec = type(self), converted.spec
        assert spec.name == (cls.DATASET or cls.SOURCE.name)
        if cls.CLASSES_PER_SPLIT is None:
            assert not spec.has_splits
            assert spec.num_classes == cls.NUM_CLASSES
        else:
            assert spec.has_splits
            counts = tuple(len(spec.classes(s)) for s in SPLIT_NAMES)
            assert counts == tuple(cls.CLASSES_PER_SPLIT)
            assert spec.num_classes == (cls.NUM_CLASSES or sum(cls.CLASSES_PER_SPLIT))
        assert spec.images_per_class == self.expected_images_per_class(converted)
        if cls.TOTAL_IMAGES is not None:
            assert spec.total_images == cls.TOTAL_IMAGES
        if cls.IMAGE_FORMAT is not None:
            assert spec.image_format == cls.IMAGE_FORMAT
        missing = [key for key in cls.SPEC_KEYS if key not in spec.provenance]
        assert not missing, f"provenance lacks {missing}"
        if cls.REFERENCE_SPEC is not None:
            folder = request.getfixturevalue("reference_data") / "dataset_specs"
            reference = load_spec(folder / f"{cls.REFERENCE_SPEC}_dataset_spec.json")
            assert spec.class_names == reference.class_names
            for split in Split:
                assert spec.classes(split) == reference.classes(split), split
            assert spec.provenance["split_origin"].startswith("published:")

    def test_records_and_index_match_the_spec(self, converted):
        """Every class file holds its count of records, each labelled with its class id, and
        the verifier (CRCs, index offsets, decoding, spec counts) finds no fault."""
        spec = converted.spec
        reader = RecordReader(converted.out)
        try:
            for class_id, count in enumerate(spec.images_per_class):
                assert reader.num_records(class_id) == count
                for k in range(count):
                    assert reader.read_example(class_id, k)[1] == class_id
        finally:
            reader.close()
        verified = verify_dataset(converted.out, progress=False)
        assert verified.ok, format_report(verified)

    def test_no_record_is_lost(self, converted):
        """The files hold exactly the records the spec counts (read without the index), every
        input not converted is listed with its reason, and the fixture's damaged inputs are
        among them by path."""
        spec, report = converted.spec, converted.report
        in_files = sum(
            sum(1 for _ in iter_records(str(spec.records_path(c)))) for c in range(spec.num_classes)
        )
        assert in_files == spec.total_images == report.images
        declared = type(self).REJECTED
        if callable(declared):
            declared = declared(converted.fixture)
        rejected = spec.provenance["rejected"]
        assert len(rejected) == declared == len(report.rejected)
        assert all(r["path"] and r["reason"] for r in rejected)
        damaged = getattr(converted.fixture, "corrupt", None)
        if isinstance(damaged, list):  # a RawFixture's inputs, relative to its root
            root = Path(getattr(converted.fixture, type(self).INPUT))
            for path in damaged:
                assert any(str(root / path) in r["path"] for r in rejected), path

    def test_reference_loader_reads_the_spec(self, converted):
        """What Meta-Dataset's `load_dataset_spec` returns agrees with our loader."""
        assert_reference_reads(converted.out)

    @pytest.mark.slow
    def test_reconversion_is_byte_identical(self, converted, tmp_path):
        cls = type(self)
        again = tmp_path / converted.out.name
        cls.convert_fixture(converted.fixture, again, workers=cls.RERUN_WORKERS)
        assert digest(again) == digest(converted.out)


def assert_reference_reads(folder: Path) -> None:
    """The reference-style loader reads the folder, and its classes per split are ours (none,
    for a dataset without a fixed split)."""
    ref = reference_loader.load_dataset_spec(folder)
    assert ref.path == str(folder)
    ours = load_spec(folder)
    assert ref.name == ours.name
    names = [ref.class_names[i] for i in range(len(ref.class_names))]
    assert names == ours.class_names
    for split, ref_split in zip(Split, reference_loader.Split):
        ours_in_split = ours.classes(split) if ours.has_splits else []
        assert reference_loader.classes_of_split(ref, ref_split) == ours_in_split
        if isinstance(ref, reference_loader.HierarchicalDatasetSpecification):
            leaves = reference_loader.leaf_wn_ids(ref, ref_split)
            assert leaves == sorted(ours.class_names[c] for c in ours.classes(split))
            counts = {n.wn_id: k for n, k in ref.images_per_class[ref_split].items()}
            for c in ours.classes(split):
                assert counts[ours.class_names[c]] == ours.images_per_class[c]
    if not isinstance(ref, reference_loader.HierarchicalDatasetSpecification):
        assert [ref.images_per_class[i] for i in range(len(names))] == ours.images_per_class
    if isinstance(ref, reference_loader.BiLevelDatasetSpecification):
        h = ours.hierarchy
        assert [ref.superclass_names[i] for i in range(len(ref.superclass_names))] == (
            h.superclass_names
        )
        assert [ref.classes_per_superclass[s] for s in range(len(h.superclass_names))] == [
            len(h.classes_of(s)) for s in range(len(h.superclass_names))
        ]
