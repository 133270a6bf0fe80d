"""Conversion helpers shared by the source tests (tests/source_test_case.py) and the other
conversion tests: convert a fixture with the real Beam pipeline, digest what it wrote."""

from __future__ import annotations

import hashlib
from pathlib import Path

from beam_pipelines.conversion.pipeline import ConversionReport, convert


def convert_source(
    source_cls, root: Path, out: Path, workers: int = 1, **options
) -> ConversionReport:
    """Convert `root` with the local runner exactly as the CLI builds it."""
    from tests.conftest import make_local_runner

    source = source_cls(**options)
    return convert(source, root, out, make_local_runner(workers))


def digest(folder: Path, spec: bool = True) -> dict[str, str]:
    """sha256 of every record and index file of a converted dataset, and of its spec (whose
    provenance names the input's form: leave it out with `spec=False` to compare records made
    from an archive and from its extracted folder)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(folder).iterdir())
        if p.suffix in (".tfrecords", ".index") or (spec and p.name == "dataset_spec.json")
    }
