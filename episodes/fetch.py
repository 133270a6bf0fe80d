"""`python -m episodes.fetch --dataset s3://bucket/converted/omniglot --output LOCAL`: copy a
converted dataset (or an episode-shards folder) from object storage to a local folder for
`EpisodeReader`.

Any Beam `FileSystems` scheme works (gs://, s3://, ...); Beam's file-system flags
(`--s3_endpoint_url`, `--s3_region_name`, `--project` ...) configure the store. A folder without
its commit marker (`dataset_spec.json`, or `episodes.json` for shards) is an unfinished
conversion and is refused. Files land in a hidden folder beside LOCAL, FETCH_THREADS objects
at a time (each streamed to its file, never whole in memory), each checked against the size
the listing gave, with a progress line every few seconds; the folder is renamed into place
only when all arrived.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from episodes.records.dataset_spec import SPEC_FILENAME
from episodes.storage.access import DEFAULT_TIMEOUT_S, check_access
from episodes.util.atomic_files import replace_folder, staging_folder
from episodes.util.cli_errors import OutputExistsError, UserError, run_main
from episodes.util.cli_style import add_dataset_argument, command_parser, single_dataset
from episodes.util.dead_job_leftovers import lock_and_clear
from episodes.util.moved_modules import moved_names

__all__ = [
    "COPY_CHUNK_BYTES",
    "FETCH_THREADS",
    "MARKERS",
    "build_parser",
    "fetch",
    "fetch_object",
    "main",
]

# Their old home (a command module): they live in episodes.records.local_dataset.
__getattr__ = moved_names(
    __name__,
    dict.fromkeys(("is_remote", "require_local_dataset"), "episodes.records.local_dataset"),
)

MARKERS = (SPEC_FILENAME, "episodes.json")  # converted dataset, episode shards
FETCH_THREADS = 8
COPY_CHUNK_BYTES = 2**20


def fetch_object(url: str, target: Path, size: int) -> None:
    """Stream the object `url` into the file `target`; UserError if its size is not `size`."""
    import shutil

    from episodes.storage import paths as storage_paths

    target.parent.mkdir(parents=True, exist_ok=True)
    with storage_paths.open_binary(url) as stream, open(target, "wb") as out:
        shutil.copyfileobj(stream, out, COPY_CHUNK_BYTES)
        copied = out.tell()
    if copied != size:
        raise UserError(
            f"{url}: read {copied} bytes but the listing says {size}; the object changed "
            "during the copy, run fetch again"
        )


def fetch(url: str, local: str | os.PathLike, overwrite: bool = False) -> tuple[Path, int, int]:
    """Copy every object under `url` into the local folder `local`; (folder, files, bytes)."""
    from episodes.storage import paths as storage_paths

    local = Path(local)
    if local.exists() and (not local.is_dir() or any(local.iterdir())) and not overwrite:
        raise OutputExistsError(
            f"{local}: exists and is not empty (pass --overwrite to replace it)"
        )
    listing = storage_paths.list_objects(url)
    if not listing:
        raise UserError(f"{url}: no objects under this prefix; expected a converted dataset")
    if not any(marker in listing for marker in MARKERS):
        raise UserError(
            f"{url}: incomplete: {len(listing)} objects but no {' or '.join(MARKERS)} (the job "
            "that wrote it did not finish; run it again with --overwrite)"
        )
    with lock_and_clear(local, "fetch"):  # one fetch per folder; what killed ones left goes
        return _fetch_locked(url, local, listing)


def _fetch_locked(url: str, local: Path, listing: dict[str, int]) -> tuple[Path, int, int]:
    from concurrent.futures import ThreadPoolExecutor

    from episodes.storage import paths as storage_paths
    from episodes.util.progress_lines import ProgressLines

    staging = staging_folder(local)
    total = sum(listing.values())
    progress = ProgressLines("fetch", len(listing), "files")

    def copy(name: str) -> None:
        fetch_object(storage_paths.join(url, name), staging / name, listing[name])

    pool = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="fetch")
    try:
        for _ in pool.map(copy, sorted(listing)):
            progress.advance()
        pool.shutdown()
        replace_folder(staging, local)
    except BaseException:
        import shutil

        pool.shutdown(cancel_futures=True)  # Ctrl-C, SIGTERM: the copies under way end, no more
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return local, len(listing), total


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "episodes.fetch",
        "Copy a converted dataset (or episode shards) from object storage to a local folder.",
    )
    add_dataset_argument(parser, several=False, help="remote dataset folder (s3://..., gs://...)")
    parser.add_argument("--output", metavar="DIR", required=True, help="local folder to create")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing folder")
    parser.add_argument(
        "--storage-timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="how long the one access check of the URL waits before saying what is missing "
        f"(default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_old_positional("url", "--dataset")
    parser.add_old_positional("local", "--output")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, beam_args = build_parser().parse_known_args(argv)
    from apache_beam.options.pipeline_options import PipelineOptions

    from episodes.storage import paths as storage_paths
    from episodes.util.output_overlap import refuse_overlap

    url = single_dataset(args.dataset)
    unknown = storage_paths.unknown_local_flags(beam_args)
    if unknown:
        raise UserError(f"unknown option(s) {' '.join(unknown)} (file-system flags only)")
    if not storage_paths.is_remote(url):
        raise UserError(f"{url}: not a URL (s3://, gs://, ...); a local folder needs no fetch")
    refuse_overlap(("--output", args.output), [("--dataset", url)])
    if not 0 < args.storage_timeout < float("inf"):
        raise UserError(f"--storage-timeout {args.storage_timeout}: expected a positive number")
    options = PipelineOptions(beam_args)
    storage_paths.use_options(options)
    check_access(url, options, args.storage_timeout)
    folder, files, size = fetch(url, args.output, args.overwrite)
    print(f"fetched {files} files ({size / 2**20:,.1f} MiB) from {url} into {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
