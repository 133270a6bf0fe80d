"""`python -m beam_pipelines.verify --dataset OUT`: check a converted dataset end to end.

Checks every record's CRCs, that the `.index` sidecar agrees with the records, that every
label equals the class id of its file, that every image decodes, and that the spec's counts
match the files. Prints a one-screen report; exit status 1 on any mismatch.

A folder converted by the reference Meta-Dataset tool has no `.index` files: its records are
checked without them (an index the reader already built in its cache folder is checked too),
and `--write-index` writes them from the offsets just read, beside the records or, in a
read-only folder, where the reader looks for them (`--index-cache-dir`).

A dataset in object storage (`--dataset s3://...`) is verified without copying it first:
VERIFY_THREADS classes at a time, each class's records and index streamed into a temporary
folder, checked, and deleted (the extra disk is a few class files, not the dataset).
"""

from __future__ import annotations

import io
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from beam_pipelines.old_positional import parse_with_one_dataset
from beam_pipelines.runners.options import add_storage_timeout_argument, storage_timeout
from episodes.images.decoded_cache import verify_cache
from episodes.images.image_size_limit import use_image_size_limit
from episodes.records.dataset_spec import SPEC_FILENAME, DatasetSpec, SpecError, Split, load_spec
from episodes.records.example_proto import ExampleDecodeError, decode_image_example
from episodes.records.local_dataset import is_remote, require_local_dataset
from episodes.records.record_index import (
    RecordIndex,
    RecordIndexError,
    cached_index_path,
    index_path_for,
    keep_index,
    read_index,
)
from episodes.records.tfrecord_io import CorruptRecordError, iter_record_offsets
from episodes.storage.access import DEFAULT_TIMEOUT_S, check_access
from episodes.util.cli_errors import UsageError, run_main, user_faults
from episodes.util.cli_style import (
    CommandParser,
    add_dataset_argument,
    command_parser,
)
from episodes.util.progress_lines import ProgressLines

__all__ = [
    "build_parser",
    "format_report",
    "IndexCheck",
    "main",
    "verify_class",
    "verify_dataset",
    "verify_remote",
    "verify_remote_dataset",
    "VERIFY_THREADS",
    "VerifyReport",
]

use_image_size_limit()  # every image the converter accepts must decode here


@dataclass
class VerifyReport:
    dataset_dir: Path
    classes: int = 0
    records: int = 0
    bytes: int = 0
    image_sizes: Counter = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    caches: int = 0  # decoded caches checked (episodes.images.decoded_cache.verify_cache)
    seconds: float = 0.0
    unindexed: list[int] = field(default_factory=list)  # classes without an index file
    indexes_written: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def add_class(self, records: int, size: int, problems: list[str], sizes: Counter) -> None:
        """Count one class's `verify_class` result into the totals."""
        self.records += records
        self.bytes += size
        self.problems.extend(problems)
        self.image_sizes.update(sizes)


@dataclass
class IndexCheck:
    """How `verify_class` treats a class's `.index`: where the reader's cache is, whether to
    write a missing index; it records which classes had none and what was written."""

    cache_dir: str | Path | None = None
    write: bool = False
    unindexed: list[int] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)

    def check(self, records_path: Path, class_id: int, offsets: list[int]) -> list[str]:
        sidecar = index_path_for(records_path)
        cached = cached_index_path(records_path, self.cache_dir)
        found = sidecar if sidecar.exists() else cached if cached.exists() else None
        if found is None:
            self.unindexed.append(class_id)
            if self.write:
                index = RecordIndex(
                    np.asarray(offsets, dtype=np.uint64), records_path.stat().st_size
                )
                where = keep_index(index, records_path, self.cache_dir)
                if where is None:
                    return [f"class {class_id}: could not write {sidecar} nor {cached}"]
                self.written.append(where)
            return []
        try:
            index = read_index(found, records_path)
        except RecordIndexError as exc:
            return [f"class {class_id}: {exc}"]
        if [int(o) for o in index.offsets] != offsets:
            return [f"class {class_id}: index {found} disagrees with the records"]
        return []


def verify_class(
    records_path: Path, class_id: int, expected: int, decode: bool, index: IndexCheck | None = None
) -> tuple[int, int, list[str], Counter]:
    """Verify one class file; return (records, bytes, problems, image sizes)."""
    problems: list[str] = []
    sizes: Counter = Counter()
    if not records_path.exists():
        return 0, 0, [f"class {class_id}: {records_path} missing"], sizes
    offsets = []
    try:
        with open(records_path, "rb") as stream:
            for k, (offset, payload) in enumerate(
                iter_record_offsets(stream, where=str(records_path))
            ):
                offsets.append(offset)
                try:
                    image, label = decode_image_example(payload)
                except ExampleDecodeError as exc:
                    problems.append(f"class {class_id} record {k}: {exc}")
                    continue
                if label != class_id:
                    problems.append(
                        f"class {class_id} record {k}: label {label} != class id {class_id}"
                    )
                if decode:
                    try:
                        with Image.open(io.BytesIO(image)) as im:
                            im.load()
                            sizes[im.size] += 1
                    except Exception as exc:
                        problems.append(
                            f"class {class_id} record {k}: image does not decode ({exc})"
                        )
    except CorruptRecordError as exc:
        problems.append(f"class {class_id}: {exc}")
        corrupt = True
    else:
        corrupt = False
    if len(offsets) != expected:
        problems.append(f"class {class_id}: {len(offsets)} records, spec says {expected}")
    if not corrupt:  # an index of a corrupt file would be wrong; the CRC problem says why
        problems.extend((index or IndexCheck()).check(records_path, class_id, offsets))
    return len(offsets), records_path.stat().st_size, problems, sizes


def verify_dataset(
    dataset_dir: str | Path,
    decode: bool = True,
    progress: bool = True,
    write_index: bool = False,
    index_cache_dir: str | Path | None = None,
) -> VerifyReport:
    """Verify every class of a converted dataset folder (ours, or the reference tool's,
    which has no `.index` files: `write_index` writes them from the offsets read)."""
    dataset_dir = Path(dataset_dir)
    report = VerifyReport(dataset_dir)
    start = time.monotonic()
    try:
        require_local_dataset(dataset_dir)
        spec = load_spec(dataset_dir)
    except SpecError as exc:
        report.problems.append(str(exc))
        return report
    report.classes = spec.num_classes
    bar = ProgressLines("verify", spec.num_classes, "classes", enabled=progress)
    index = IndexCheck(index_cache_dir, write_index)
    for class_id in range(spec.num_classes):
        result = verify_class(
            spec.records_path(class_id), class_id, spec.images_per_class[class_id], decode, index
        )
        report.add_class(*result)
        bar.advance()
    for manifest in sorted(dataset_dir.glob("decoded_*/manifest.json")):
        report.problems.extend(verify_cache(manifest.parent, spec))
        report.caches += 1
    expected_files = {spec.file_pattern.format(c) for c in range(spec.num_classes)}
    stray = sorted(p.name for p in dataset_dir.glob("*.tfrecords") if p.name not in expected_files)
    if stray:
        report.problems.append(f"record files not in the spec: {stray[:5]}")
    empty = [c for c in range(spec.num_classes) if spec.images_per_class[c] == 0]
    if empty:
        report.warnings.append(f"{len(empty)} classes have no images: {empty[:10]}")
    report.unindexed, report.indexes_written = index.unindexed, index.written
    if index.unindexed and not index.written:
        report.warnings.append(
            f"{len(index.unindexed)} classes have no .index file (a reference-converted folder?): "
            "checked without; the reader builds them on first use, --write-index writes them now"
        )
    elif index.written:
        places = sorted({str(p.parent) for p in index.written})
        report.warnings.append(
            f"wrote {len(index.written)} missing .index files into {', '.join(places[:2])}"
        )
    return _finish(report, spec, start)


def _finish(report: VerifyReport, spec: DatasetSpec, start: float) -> VerifyReport:
    """The closing warning on inputs rejected at conversion, the time taken and the spec."""
    rejected = spec.provenance.get("rejected_count", 0)
    if rejected:
        report.warnings.append(
            f"{rejected} raw inputs were rejected at conversion (see provenance)"
        )
    report.seconds = time.monotonic() - start
    report.spec = spec  # type: ignore[attr-defined]
    return report


VERIFY_THREADS = 4


def verify_remote_dataset(url: str, decode: bool = True, progress: bool = True) -> VerifyReport:
    """Verify a finished dataset in object storage (its spec present) class by class, a few
    classes at once, each fetched into a temporary folder and deleted once checked."""
    import os
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from episodes.fetch import fetch_object
    from episodes.storage import paths as storage_paths

    report = VerifyReport(url)  # type: ignore[arg-type]  # shown as given
    start = time.monotonic()
    listing = storage_paths.list_objects(url)
    spec = storage_paths.load_remote_spec(url)
    report.classes = spec.num_classes
    bar = ProgressLines("verify", spec.num_classes, "classes", enabled=progress)
    checks: list[IndexCheck] = []

    def one(class_id: int) -> tuple[int, int, list[str], Counter]:
        records = spec.file_pattern.format(class_id)
        index_name = os.path.splitext(records)[0] + ".index"
        with tempfile.TemporaryDirectory(prefix="fewshot-verify-") as tmp:
            for name in (records, index_name):
                if name in listing:
                    fetch_object(storage_paths.join(url, name), Path(tmp, name), listing[name])
            check = IndexCheck(Path(tmp, "no-index-cache"))
            checks.append(check)
            n, size, problems, sizes = verify_class(
                Path(tmp, records), class_id, spec.images_per_class[class_id], decode, check
            )
            problems = [p.replace(tmp, url) for p in problems]
        return n, size, problems, sizes

    with ThreadPoolExecutor(VERIFY_THREADS, thread_name_prefix="verify") as pool:
        for result in pool.map(one, range(spec.num_classes)):
            report.add_class(*result)
            bar.advance()
    expected_files = {spec.file_pattern.format(c) for c in range(spec.num_classes)}
    stray = sorted(
        n for n in listing if n.endswith(".tfrecords") and "/" not in n and n not in expected_files
    )
    if stray:
        report.problems.append(f"record files not in the spec: {stray[:5]}")
    if any(n.startswith("decoded_") and n.endswith("/manifest.json") for n in listing):
        report.warnings.append("decoded caches in object storage are not checked (fetch first)")
    empty = [c for c in range(spec.num_classes) if spec.images_per_class[c] == 0]
    if empty:
        report.warnings.append(f"{len(empty)} classes have no images: {empty[:10]}")
    report.unindexed = sorted(c for check in checks for c in check.unindexed)
    if report.unindexed:
        report.warnings.append(
            f"{len(report.unindexed)} classes have no .index file: checked without; the "
            "reader builds them on first use"
        )
    return _finish(report, spec, start)


def format_report(report: VerifyReport) -> str:
    lines = [f"Verify {report.dataset_dir}"]
    spec = getattr(report, "spec", None)
    if spec is not None:
        lines.append(
            f"  dataset: {spec.name} ({spec.source_format} spec, {spec.image_format or '?'} images)"
        )
        if spec.has_splits:
            per = ", ".join(f"{s.value} {len(spec.classes(s))}" for s in Split)
            lines.append(f"  classes: {report.classes} ({per})")
        else:
            lines.append(f"  classes: {report.classes} (no fixed split)")
    lines.append(
        f"  records: {report.records:,} in {report.bytes / 1e6:,.1f} MB, checked in {report.seconds:.1f}s"
    )
    if report.image_sizes:
        common = ", ".join(f"{w}x{h} ({n:,})" for (w, h), n in report.image_sizes.most_common(3))
        lines.append(f"  image sizes: {common}")
    if report.caches:
        lines.append(f"  decoded caches: {report.caches} checked (array sizes, SHA-256, shapes)")
    for warning in report.warnings:
        lines.append(f"  warning: {warning}")
    if report.ok:
        checked = "CRCs, index offsets" if not report.unindexed else "CRCs"
        lines.append(f"  OK: {checked}, labels, image decoding and spec counts all agree")
    else:
        lines.append(f"  FAILED: {len(report.problems)} problem(s)")
        for problem in report.problems[:15]:
            lines.append(f"    {problem}")
        if len(report.problems) > 15:
            lines.append(f"    ... {len(report.problems) - 15} more")
    return "\n".join(lines)


def verify_remote(
    url: str, beam_args: list[str], decode: bool, storage_timeout_s: float = DEFAULT_TIMEOUT_S
) -> int:
    """Verify a dataset in object storage: refuse it without its spec (an unfinished
    conversion), else verify it class by class (`verify_remote_dataset`)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from episodes.storage import paths as storage_paths

    unknown = storage_paths.unknown_local_flags(beam_args)
    if unknown or not is_remote(url):
        extra = " ".join(unknown or beam_args)
        raise UsageError(
            f"unexpected argument(s) {extra} (file-system flags go with a dataset URL only)"
        )
    options = PipelineOptions(beam_args)
    storage_paths.use_options(options)
    check_access(url, options, storage_timeout_s)
    if SPEC_FILENAME not in storage_paths.list_objects(url):
        print(
            f"{url}: FAILED: incomplete: no {SPEC_FILENAME} (the conversion did not "
            "finish; convert again with --overwrite)"
        )
        return 1
    report = verify_remote_dataset(url, decode=decode)
    print(format_report(report))
    return 0 if report.ok else 1


def build_parser() -> CommandParser:
    """`--dataset DIR` (the old positional folder still parses, with a note) and the checks."""
    parser = command_parser("beam_pipelines.verify", __doc__.split("\n")[0])
    add_dataset_argument(
        parser,
        required=False,
        several=False,
        help="converted dataset folder (with dataset_spec.json), or its gs:// / s3:// URL",
    )
    parser.add_argument("--no-decode", action="store_true", help="skip decoding images (faster)")
    add_storage_timeout_argument(parser)
    parser.add_argument(
        "--write-index",
        action="store_true",
        help="write missing .index files (a reference-converted folder) from the offsets read",
    )
    parser.add_argument(
        "--index-cache-dir",
        default=None,
        help="where indexes of a read-only folder live (default: the reader's, "
        "~/.cache/fewshot-tasksets/index)",
    )
    return parser


@user_faults
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, beam_args, dataset = parse_with_one_dataset(parser, argv, "check")
    if is_remote(dataset) or beam_args:
        timeout = storage_timeout(args)
        return verify_remote(
            dataset, beam_args, decode=not args.no_decode, storage_timeout_s=timeout
        )
    path = Path(dataset)
    if not path.is_dir():
        raise SpecError(f"{path}: not a folder; expected a converted dataset folder")
    report = verify_dataset(
        path,
        decode=not args.no_decode,
        write_index=args.write_index,
        index_cache_dir=args.index_cache_dir,
    )
    print(format_report(report))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(run_main(main))
