"""Checks shared by the Meta-Dataset source tests: convert a fixture with the real Beam pipeline
and compare the result with the reference dataset spec (class names in id order, splits)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from beam_pipelines.conversion import ConversionReport, convert
from beam_pipelines.verify import format_report, verify_dataset
from episodes.records.dataset_spec import DatasetSpec, Split, load_spec
from episodes.records.record_reader import RecordReader
from tests.raw_fixtures.fixture_info import RawFixture


def convert_source(source_cls, root: Path, out: Path, workers: int = 1, **options) -> ConversionReport:
    """Convert `root` with the local runner exactly as the CLI builds it."""
    from tests.conftest import make_local_runner

    source = source_cls(**options)
    return convert(source, root, out, make_local_runner(workers))


def reference_spec(reference_data: Path, dataset: str) -> DatasetSpec:
    return load_spec(reference_data / "dataset_specs" / f"{dataset}_dataset_spec.json")


def check_matches_reference(out: Path, reference: DatasetSpec, fixture: RawFixture) -> DatasetSpec:
    """Class id -> name and the splits equal the reference spec's; image counts equal the
    fixture's; every record carries its class id; the corrupt inputs are listed as rejected."""
    spec = load_spec(out)
    assert spec.class_names == reference.class_names
    for split in Split:
        assert spec.classes(split) == reference.classes(split), split
    assert spec.images_per_class == [fixture.images_per_class[n] for n in spec.class_names]
    reader = RecordReader(out)
    for class_id, count in enumerate(spec.images_per_class):
        assert reader.num_records(class_id) == count
        for k in range(count):
            assert reader.read_example(class_id, k)[1] == class_id
    reader.close()
    verified = verify_dataset(out, progress=False)
    assert verified.ok, format_report(verified)
    rejected = [r["path"] for r in spec.provenance["rejected"]]
    for corrupt in fixture.corrupt:
        assert any(str(fixture.root / corrupt) in p for p in rejected), (corrupt, rejected)
    assert spec.provenance["split_origin"].startswith("published:")
    return spec


def digest(folder: Path) -> dict[str, str]:
    """sha256 of every record, index and spec file of a converted dataset."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(folder).iterdir())
        if p.suffix in (".tfrecords", ".index") or p.name == "dataset_spec.json"
    }
