"""`python -m beam_pipelines.cache --dataset OUT [--image-size 84]`: write the decoded cache of a
converted dataset.

One Beam element per class: decode all its records (thread pool), resize to SIZE x SIZE (the
reader's `--resize` mode) and write `{class_id}.npy` into a staging folder, with its size and
SHA-256 in `{class_id}.npy.sum`; when every class is done the driver folds those into the
manifest and renames the folder to `OUT/decoded_SIZExSIZE/` (or under `--cache-root`). The
reader (`episodes.reading.reader.EpisodeReader`) then gathers images from memory maps instead of decoding,
and `beam_pipelines.verify` checks the arrays against their checksums.
Memory per worker holds one class. Runs on the DirectRunner unless `--runner` says otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import Path

import apache_beam as beam

from beam_pipelines.old_positional import parse_with_one_dataset
from beam_pipelines.runners.interrupt_exit import exit_on_interrupt
from beam_pipelines.runners.job_faults import UNWRITABLE_ERRNOS, unwritable_output_in_one_line
from beam_pipelines.runners.options import add_runner_arguments, make_runner
from beam_pipelines.runners.output_lock import acquire_output_lock
from episodes.images.decoded_cache import (
    MANIFEST,
    ClassArray,
    DecodedCacheError,
    cache_path,
    decode_class,
    finish_cache,
    manifest_for,
    write_class_array,
)
from episodes.images.image_decode import DEFAULT_RESIZE, RESIZE_MODES
from episodes.images.image_size_limit import MAX_IMAGE_SIDE
from episodes.records.dataset_spec import DatasetSpec, load_spec
from episodes.records.record_reader import RecordReader
from episodes.util.atomic_files import missing_parents, remove_if_empty, staging_folder
from episodes.util.cli_errors import os_error_line, user_faults
from episodes.util.cli_style import (
    CommandParser,
    add_dataset_argument,
    command_parser,
)
from episodes.util.dead_job_leftovers import clear_leftovers
from episodes.util.npy_maps import open_npy_map
from episodes.util.output_overlap import refuse_overlap

__all__ = [
    "build_cache",
    "build_parser",
    "class_entries",
    "DecodeClassFn",
    "main",
    "SUM_SUFFIX",
    "unwritable_cache_in_one_line",
]

SUM_SUFFIX = ".npy.sum"  # per-class entry the workers leave for the driver's manifest


class DecodeClassFn(beam.DoFn):
    """class id -> `{class_id}.npy` in the staging folder; emits (class id, image count)."""

    def __init__(
        self,
        dataset_dir: str,
        file_pattern: str,
        size: int,
        staging: str,
        threads: int,
        index_cache_dir: str | None,
        total: int,
        resize: str = DEFAULT_RESIZE,
    ):
        self.dataset_dir = dataset_dir
        self.file_pattern = file_pattern
        self.size = size
        self.staging = staging
        self.threads = threads
        self.index_cache_dir = index_cache_dir
        self.total = total
        self.resize = resize

    def setup(self) -> None:
        self._reader = RecordReader(
            self.dataset_dir, self.file_pattern, index_cache_dir=self.index_cache_dir
        )
        self._pool = ThreadPoolExecutor(self.threads) if self.threads > 0 else None
        self._done = 0
        self._images = 0
        self._start = time.monotonic()
        self._last = self._start

    def process(self, class_id: int):
        map_fn = self._pool.map if self._pool is not None else None
        array = decode_class(self._reader, class_id, self.size, map_fn, self.resize)
        entry = write_class_array(array, self.staging, class_id)
        summary = Path(self.staging, f"{class_id}{SUM_SUFFIX}")
        summary.write_text(json.dumps(dataclasses.asdict(entry)))
        self._done += 1
        self._images += len(array)
        now = time.monotonic()
        if now - self._last >= 5.0:
            self._last = now
            rate = self._images / max(now - self._start, 1e-9)
            print(
                f"[cache] pid {os.getpid()}: {self._done} classes, {self._images:,} images, "
                f"{rate:,.0f} img/s",
                file=sys.stderr,
                flush=True,
            )
        yield class_id, int(array.shape[0])

    def teardown(self) -> None:
        if getattr(self, "_pool", None) is not None:
            self._pool.shutdown()
        if getattr(self, "_reader", None) is not None:
            self._reader.close()


def class_entries(staging: Path, num_classes: int) -> list[ClassArray]:
    """The entry (images, bytes, SHA-256) the pipeline left for every class array, checked
    against the array's header and size; the entry files are removed."""
    entries = []
    for class_id in range(num_classes):
        path = staging / f"{class_id}.npy"
        summary = staging / f"{class_id}{SUM_SUFFIX}"
        if not path.exists() or not summary.exists():
            raise DecodedCacheError(f"{path}: class {class_id} was not written by the pipeline")
        entry = ClassArray(**json.loads(summary.read_text()))
        images = int(open_npy_map(path).shape[0])
        if (images, path.stat().st_size) != (entry.images, entry.nbytes):
            raise DecodedCacheError(f"{path}: differs from what the pipeline wrote")
        entries.append(entry)
        summary.unlink()
    return entries


def build_cache(
    spec: DatasetSpec,
    size: int,
    runner,
    *,
    cache_root: str | None = None,
    threads: int = 2,
    overwrite: bool = True,
    index_cache_dir: str | None = None,
    resize: str = DEFAULT_RESIZE,
    exit_on_ctrl_c: bool = False,
) -> Path:
    """Run the pipeline for every class of `spec` and move the finished cache into place. The
    cache folder is locked for the job (a second one is refused) and the staging folders that
    killed jobs left beside it are removed first. `exit_on_ctrl_c` (the CLI): Ctrl-C or SIGTERM
    while the pipeline runs removes the staging folder, frees the lock and ends the process in
    one line (beam_pipelines.runners.interrupt_exit)."""
    target = cache_path(spec.root, size, cache_root)
    # its designed place is inside the dataset (or under --cache-root): never the dataset itself
    refuse_overlap(
        ("cache folder", target),
        [("--dataset", spec.root), ("--index-cache-dir", index_cache_dir)],
        allowed_inside=[spec.root],
    )
    created = missing_parents(target)  # removed again, if still empty, when the job fails
    try:
        with acquire_output_lock(target) as lock:
            clear_leftovers(lock, lock.output, "cache job")
            guard = nullcontext()
            if exit_on_ctrl_c:

                def stop() -> None:  # the process ends after this
                    shutil.rmtree(staging, ignore_errors=True)
                    lock.release()
                    remove_if_empty(created)

                line = (
                    f"interrupted: cache job stopped and its staging folder removed; {target} "
                    + ("is as it was" if target.exists() else "was not written")
                )
                guard = exit_on_interrupt(stop, line)
            if target.exists() and not overwrite:
                raise DecodedCacheError(f"{target}: a decoded cache exists (pass --overwrite)")
            staging = staging_folder(target)
            with unwritable_cache_in_one_line(target):
                return _build_cache_locked(
                    spec, size, runner, target, threads, staging, index_cache_dir, resize, guard,
                    overwrite,
                )  # fmt: skip
    except BaseException:
        remove_if_empty(created)
        raise


@contextmanager
def unwritable_cache_in_one_line(target: Path) -> Iterator[None]:
    """A full disk (or a read-only or unwritable folder) while the cache is written: one
    DecodedCacheError naming the cache folder, whose flag is --cache-root (Beam's logged
    tracebacks of it dropped)."""
    try:
        with unwritable_output_in_one_line(target):
            yield
    except OSError as exc:
        if exc.errno not in UNWRITABLE_ERRNOS:
            raise
        raise DecodedCacheError(
            os_error_line(exc).replace("choose another --output", "choose another --cache-root")
        ) from None


def _build_cache_locked(
    spec, size, runner, target, threads, staging, index_cache_dir, resize, guard, overwrite
):
    try:
        with guard, beam.Pipeline(runner=runner.runner, options=runner.options) as pipeline:
            _ = (
                pipeline
                | "Classes" >> beam.Create(list(range(spec.num_classes)))
                | "Spread" >> beam.Reshuffle()
                | "DecodeClass"
                >> beam.ParDo(
                    DecodeClassFn(
                        str(spec.root),
                        spec.file_pattern,
                        size,
                        str(staging),
                        threads,
                        index_cache_dir,
                        spec.num_classes,
                        resize,
                    )
                )
            )
        entries = class_entries(staging, spec.num_classes)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return finish_cache(staging, target, manifest_for(spec, size, entries, resize), overwrite)


def build_parser() -> CommandParser:
    """`--dataset DIR` (the old positional folder still parses, with a note), size and runner."""
    parser = command_parser(
        "beam_pipelines.cache",
        "Decode a converted dataset into a memory-mappable uint8 cache per class.",
    )
    add_dataset_argument(
        parser,
        required=False,
        several=False,
        help="converted dataset folder (with dataset_spec.json)",
    )
    parser.add_argument(
        "--image-size",
        type=int,
        default=84,
        metavar="N",
        renamed_from=("--size",),
        help="image side in pixels: the cached images are N x N (default 84)",
    )
    parser.add_argument(
        "--resize",
        default=DEFAULT_RESIZE,
        choices=RESIZE_MODES,
        help="resampling method: reference (Meta-Dataset's TF bilinear) or antialias, as the "
        f"reader's --resize (default {DEFAULT_RESIZE})",
    )
    parser.add_argument(
        "--cache-root",
        help="folder of decoded caches: write under CACHE_ROOT/<dataset>/ instead of the "
        "dataset folder (for read-only datasets)",
    )
    parser.add_argument("--threads", type=int, default=2, help="decoding threads per worker")
    parser.add_argument("--index-cache-dir", help="where to keep built .index files")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing cache")
    add_runner_arguments(parser)
    return parser


@user_faults
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, beam_args, dataset = parse_with_one_dataset(parser, argv, "cache")
    if not 1 <= args.image_size <= MAX_IMAGE_SIDE:
        parser.error(
            f"--image-size {args.image_size}: expected 1..{MAX_IMAGE_SIDE} (the image size limit)"
        )
    if args.threads < 0:
        parser.error(f"--threads {args.threads}: expected >= 0")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    spec = load_spec(dataset)
    missing = [c for c in range(spec.num_classes) if not spec.records_path(c).exists()]
    if missing:
        raise DecodedCacheError(
            f"{len(missing)} record files missing, e.g. {spec.records_path(missing[0])}"
        )
    runner = make_runner(args, beam_args)
    t0 = time.monotonic()
    target = build_cache(
        spec,
        args.image_size,
        runner,
        cache_root=args.cache_root,
        threads=args.threads,
        overwrite=args.overwrite,
        index_cache_dir=args.index_cache_dir,
        resize=args.resize,
        exit_on_ctrl_c=True,
    )
    took = time.monotonic() - t0
    images = sum(json.loads((target / MANIFEST).read_text())["images"])
    size_mb = sum(f.stat().st_size for f in target.glob("*.npy")) / 2**20
    print(
        f"wrote {target}: {spec.num_classes} classes, {images:,} images "
        f"({size_mb:,.1f} MiB) in {took:.1f} s"
    )
    return 0


if __name__ == "__main__":
    from episodes.util.cli_errors import run_main

    sys.exit(run_main(main))
