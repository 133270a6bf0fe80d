"""`python -m beam_pipelines.episodes --dataset OUT --split test --episodes 600 --seed 0
--output SHARDS`: materialise an episode stream as TFRecord shards with Apache Beam.

One Beam element per shard: the worker describes its episodes (i % num_shards == shard), reads
their encoded images from the dataset's records (no re-encoding) and writes the shard with
`episodes.records.tfrecord_io`, episodes in increasing index. The shard count does not depend on the
worker count and nothing depends on bundle order, so 1 or N workers give the same bytes. Shards
go to a staging folder that is renamed to SHARDS at the end, with a manifest `episodes.json`
(parameters, files, episode counts, sha256). Record keys: see `episodes.reading.episode_shards`.
A `--dataset` URL (s3://, gs://) is read by the workers where it lies, one ranged read per
record (beam_pipelines.remote_episode_source): no worker needs a local copy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

import apache_beam as beam

from beam_pipelines.conversion.pipeline import output_exists
from beam_pipelines.remote_episode_source import RemoteEpisodeSource
from beam_pipelines.runners.interrupt_exit import exit_on_interrupt
from beam_pipelines.runners.job_faults import unwritable_output_in_one_line
from beam_pipelines.runners.options import add_runner_arguments, make_runner
from beam_pipelines.runners.output_lock import (
    OutputLock,
    acquire_output_lock,
    clear_remote_leftovers,
)
from episodes.reading.episode_shards import (
    MANIFEST,
    SHARDS_FORMAT,
    encode_episode,
    shard_file_name,
    shard_indices,
)
from episodes.reading.reader import EpisodeReader
from episodes.records.reader_errors import ReaderError
from episodes.records.tfrecord_io import frame_record
from episodes.sampling.episode_cli import (
    add_episode_source_arguments,
    add_sampler_arguments,
    sampler_config_from_args,
    sampling_mode_from_args,
)
from episodes.sampling.modes import manifest_fields, mode_from_json
from episodes.storage import paths as storage_paths
from episodes.util.atomic_files import atomic_path, replace_folder, staging_folder
from episodes.util.cli_errors import OutputExistsError, user_faults
from episodes.util.cli_style import command_parser
from episodes.util.dead_job_leftovers import clear_leftovers
from episodes.util.output_overlap import refuse_overlap
from episodes.util.progress_lines import ProgressLines

__all__ = [
    "build_parser",
    "default_num_shards",
    "HASH_FOLDER",
    "hash_path",
    "main",
    "manifest_for",
    "MAX_DEFAULT_SHARDS",
    "mean_episode_bytes",
    "remove_hashes",
    "sha256_of",
    "shard_sha256",
    "ShardJob",
    "SIZE_SAMPLE_EPISODES",
    "TARGET_SHARD_BYTES",
    "write_episode_shards",
    "write_shard",
    "WriteShardFn",
]

# Default shard count: shards of about TARGET_SHARD_BYTES (TensorFlow's TFRecord guide asks for
# files of 10+ MB, ideally 100+ MB, for read throughput), estimated from the encoded images of
# the first SIZE_SAMPLE_EPISODES episodes; at most one shard per episode and MAX_DEFAULT_SHARDS.
TARGET_SHARD_BYTES = 128 << 20
SIZE_SAMPLE_EPISODES = 8
MAX_DEFAULT_SHARDS = 4096


@dataclass(frozen=True)
class ShardJob:
    """Everything a worker needs to write any shard (small and picklable)."""

    dataset_dirs: tuple[str, ...]
    split: str
    config: dict
    seed: int
    start: int
    num_episodes: int
    num_shards: int | None  # None: default_num_shards, from the first episodes' size
    staging: str
    split_file: str | None = None
    index_cache_dir: str | None = None
    sampling: dict | None = None  # SamplingMode.to_json(); None: Meta-Dataset's sampler

    def reader(self) -> EpisodeReader | RemoteEpisodeSource:
        """The episodes to write: an EpisodeReader of local folders, or, when a dataset is a
        URL, its records read where they lie (beam_pipelines.remote_episode_source)."""
        from episodes.sampling.modes import mode_from_json
        from episodes.sampling.sampler_config import SamplerConfig

        sampling = mode_from_json(self.sampling)
        if any(storage_paths.is_remote(d) for d in self.dataset_dirs):
            return RemoteEpisodeSource(
                list(self.dataset_dirs),
                self.split,
                SamplerConfig.from_json(self.config),
                self.seed,
                split_file=self.split_file,
                sampling=sampling,
            )
        return EpisodeReader(
            list(self.dataset_dirs),
            self.split,
            SamplerConfig.from_json(self.config),
            self.seed,
            num_threads=0,
            decode_processes=0,  # shards hold encoded bytes: nothing is decoded here
            decoded_cache="never",
            split_file=self.split_file,
            index_cache_dir=self.index_cache_dir,
            sampling=sampling,
        )


def default_num_shards(num_episodes: int, episode_bytes: float) -> int:
    """Shards of about TARGET_SHARD_BYTES for `num_episodes` episodes of `episode_bytes` each:
    at least 1, at most one per episode and MAX_DEFAULT_SHARDS."""
    wanted = math.ceil(num_episodes * max(float(episode_bytes), 1.0) / TARGET_SHARD_BYTES)
    return max(1, min(wanted, num_episodes, MAX_DEFAULT_SHARDS))


def mean_episode_bytes(reader: Any, start: int, num_episodes: int) -> float:
    """Mean encoded image bytes of the first (at most SIZE_SAMPLE_EPISODES) episodes of the
    job: what a shard holds per episode, less the small labels and names."""
    count = max(1, min(SIZE_SAMPLE_EPISODES, num_episodes))
    total = 0
    for index in range(start, start + count):
        support, query = reader.encoded_images(reader.describe(index))
        total += sum(map(len, support)) + sum(map(len, query))
    return total / count


@contextmanager
def _shard_stream(staging: str, name: str) -> Iterator[BinaryIO]:
    """A shard file's stream: beside its final name locally, one object in object storage."""
    if storage_paths.is_remote(staging):
        with storage_paths.create_stream(storage_paths.join(staging, name)) as out:
            yield out
        return
    with atomic_path(Path(staging) / name) as tmp, open(tmp, "wb") as out:
        yield out


HASH_FOLDER = "_sha256"  # in the staging folder: each shard's SHA-256, removed before publishing


def hash_path(staging: str, name: str) -> str:
    return storage_paths.join(staging, HASH_FOLDER, f"{name}.sha256")


def write_shard(job: ShardJob, shard: int, reader: EpisodeReader) -> dict[str, Any]:
    """Write shard `shard` of `job` into the staging folder, and its SHA-256 (computed while
    writing, so the launcher never reads the shards again); return its file and count."""
    name = shard_file_name(shard, job.num_shards)
    count = 0
    digest = hashlib.sha256()
    indices = shard_indices(shard, job.num_shards, job.start, job.num_episodes)
    bar = ProgressLines(f"episodes shard {shard}", len(indices), "episodes")
    with _shard_stream(job.staging, name) as out:
        for index in indices:
            description = reader.describe(index)
            support, query = reader.encoded_images(description)
            names = reader.spec(description.source).class_names
            payload = encode_episode(
                description,
                support,
                query,
                seed=job.seed,
                class_names=[names[c] for c in description.class_ids],
                sampler_config=job.config,
            )
            frame = frame_record(payload)
            out.write(frame)
            digest.update(frame)
            count += 1
            bar.advance()
    if not storage_paths.is_remote(job.staging):
        Path(job.staging, HASH_FOLDER).mkdir(exist_ok=True)
    storage_paths.write_bytes(hash_path(job.staging, name), digest.hexdigest().encode())
    return {"shard": shard, "file": name, "episodes": count}


class WriteShardFn(beam.DoFn):
    def __init__(self, job: ShardJob):
        self.job = job

    def setup(self) -> None:
        self._reader = self.job.reader()

    def process(self, shard: int):
        yield write_shard(self.job, shard, self._reader)

    def teardown(self) -> None:
        if getattr(self, "_reader", None) is not None:
            self._reader.close()


def sha256_of(path: Path | str) -> str:
    digest = hashlib.sha256()
    with storage_paths.open_binary(str(path)) as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_for(job: ShardJob, reader: EpisodeReader, staging: Path | str) -> dict[str, Any]:
    files = [shard_file_name(s, job.num_shards) for s in range(job.num_shards)]
    return {
        "format": SHARDS_FORMAT,
        "datasets": [s.name for s in reader.specs],
        "split": reader.split.value,
        "split_file": Path(job.split_file).name if job.split_file else None,
        "seed": job.seed,
        **manifest_fields(mode_from_json(job.sampling)),  # e.g. FIX-ML's lambda and base split
        "start": job.start,
        "episodes": job.num_episodes,
        "num_shards": job.num_shards,
        "sampler_config": job.config,
        "files": files,
        "episodes_per_file": [
            len(shard_indices(s, job.num_shards, job.start, job.num_episodes))
            for s in range(job.num_shards)
        ],
        "sha256": [shard_sha256(str(staging), f) for f in files],
    }


def shard_sha256(staging: str, name: str) -> str:
    """The SHA-256 its worker wrote for shard `name` (or, if none, hashed from the shard)."""
    try:
        return storage_paths.read_bytes(hash_path(staging, name)).decode()
    except OSError:
        return sha256_of(storage_paths.join(staging, name))


def remove_hashes(staging: str) -> None:
    """Remove the workers' SHA-256 files before the shards are published."""
    if storage_paths.is_remote(staging):
        storage_paths.discard_prefix(storage_paths.join(staging, HASH_FOLDER))
    else:
        shutil.rmtree(Path(staging, HASH_FOLDER), ignore_errors=True)


def write_episode_shards(
    job_args: dict[str, Any],
    output: Path,
    runner,
    overwrite: bool = False,
    exit_on_ctrl_c: bool = False,
) -> dict[str, Any]:
    """Validate, run the pipeline into a staging folder, then move it to `output`.
    `exit_on_ctrl_c` (the CLI): a Ctrl-C or SIGTERM while the pipeline runs removes the staging
    folder and ends the process with one line (beam_pipelines.runners.interrupt_exit). A local output
    is locked for the job (a second job on it is refused), and staging folders of jobs that
    died beside it are removed first. The output is never a dataset, split file or index cache
    the job reads, nor a folder around or inside one (episodes.util.output_overlap)."""
    refuse_overlap(
        ("--output", output),
        [
            *(("--dataset", d) for d in job_args["dataset_dirs"]),
            ("--split-file", job_args.get("split_file")),
            ("--index-cache-dir", job_args.get("index_cache_dir")),
        ],
    )
    if storage_paths.is_remote(output):
        return _write_episode_shards(job_args, output, runner, overwrite, exit_on_ctrl_c, None)
    with acquire_output_lock(output) as lock:  # freed when the process ends, kill -9 too
        clear_leftovers(lock, lock.output, "shards job")
        return _write_episode_shards(
            job_args, Path(output), runner, overwrite, exit_on_ctrl_c, lock
        )


def _write_episode_shards(
    job_args: dict[str, Any],
    output: Path,
    runner,
    overwrite: bool,
    exit_on_ctrl_c: bool,
    lock: OutputLock | None,
) -> dict[str, Any]:
    remote = storage_paths.is_remote(output)
    if remote:  # object storage: a staging prefix, episodes.json published last
        storage_paths.use_options(runner.options)
        runner.check_storage(output)
        storage_paths.check_output_prefix(str(output), overwrite, MANIFEST)
        clear_remote_leftovers(str(output))
        staging = storage_paths.staging_prefix(str(output))
    else:
        output = Path(output)
        if output.exists() and not overwrite:
            raise OutputExistsError(f"{output}: output exists (pass --overwrite to replace it)")
        staging = None
    remote_datasets = [d for d in job_args["dataset_dirs"] if storage_paths.is_remote(d)]
    if remote_datasets:  # read by the workers where they lie
        storage_paths.use_options(runner.options)
        runner.check_storage(*remote_datasets)
    job = ShardJob(staging=str(staging or output), **job_args)
    if job.num_episodes < 1 or (job.num_shards is not None and job.num_shards < 1) or job.start < 0:
        raise ReaderError(
            f"episodes={job.num_episodes}, num_shards={job.num_shards}, "
            f"start={job.start}: expected episodes >= 1, shards >= 1, start >= 0"
        )
    reader = job.reader()  # validates dataset, split, sampler config before the pipeline
    reader.describe(job.start)
    if job.num_shards is None:
        episode_bytes = mean_episode_bytes(reader, job.start, job.num_episodes)
        job = replace(job, num_shards=default_num_shards(job.num_episodes, episode_bytes))
    existed = output_exists(output)
    if not remote:
        staging = staging_folder(output)  # .NAME.tmp-PID-HEX8, found by remove_leftovers
        job = replace(job, staging=str(staging))

    def discard() -> None:
        if remote:
            storage_paths.discard_prefix(staging)
        else:
            shutil.rmtree(staging, ignore_errors=True)

    def stop() -> None:  # Ctrl-C or SIGTERM: the process ends after this
        discard()
        if lock is not None:
            lock.release()

    stopped = f"interrupted: shards job stopped and its staging folder removed; {output} " + (
        "is as it was" if existed else "was not written"
    )
    try:
        with (
            exit_on_interrupt(stop, stopped) if exit_on_ctrl_c else nullcontext(),
            unwritable_output_in_one_line(output),  # a full disk: one line naming the output
        ):
            with beam.Pipeline(runner=runner.runner, options=runner.options) as pipeline:
                _ = (
                    pipeline
                    | "Shards" >> beam.Create(list(range(job.num_shards)))
                    | "Spread" >> beam.Reshuffle()
                    | "WriteShard" >> beam.ParDo(WriteShardFn(job))
                )
        manifest = manifest_for(job, reader, staging)
        remove_hashes(str(staging))
        text = json.dumps(manifest, indent=1) + "\n"
        if remote:
            storage_paths.write_bytes(storage_paths.join(staging, MANIFEST), text.encode())
            storage_paths.publish_staged(staging, str(output), MANIFEST)
        else:
            (staging / MANIFEST).write_text(text)
    except BaseException:
        discard()
        raise
    finally:
        reader.close()
    if not remote:
        replace_folder(staging, output)
    return manifest


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "beam_pipelines.episodes",
        "Write a stream of episodes as TFRecord shards (one tf.train.Example each).",
    )
    add_episode_source_arguments(parser)
    parser.add_argument("--episodes", type=int, required=True, help="number of episodes")
    parser.add_argument("--start", type=int, default=0, help="first episode index")
    parser.add_argument(
        "--seed", type=int, default=0, help="random seed of the episodes (default 0)"
    )
    parser.add_argument("--output", required=True, help="shards folder to create")
    parser.add_argument(
        "--num-shards",
        type=int,
        default=None,
        help=f"shard files (default: about {TARGET_SHARD_BYTES >> 20} MiB each, from the size "
        f"of the first {SIZE_SAMPLE_EPISODES} episodes; at most one per episode and "
        f"{MAX_DEFAULT_SHARDS})",
    )
    parser.add_argument("--split-file", help="split JSON overriding the spec's splits")
    parser.add_argument("--index-cache-dir", help="where to keep built .index files")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output")
    add_sampler_arguments(parser)
    add_runner_arguments(parser)
    return parser


@user_faults
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    config = sampler_config_from_args(args)
    job_args = {
        "dataset_dirs": tuple(str(d) for d in args.dataset),
        "split": args.split,
        "config": config.to_json(),
        "seed": args.seed,
        "start": args.start,
        "num_episodes": args.episodes,
        "num_shards": args.num_shards,
        "split_file": args.split_file,
        "index_cache_dir": args.index_cache_dir,
        "sampling": sampling_mode_from_args(args).to_json(),
    }
    runner = make_runner(args, beam_args)
    t0 = time.monotonic()
    output = args.output if storage_paths.is_remote(args.output) else Path(args.output)
    manifest = write_episode_shards(job_args, output, runner, args.overwrite, exit_on_ctrl_c=True)
    took = time.monotonic() - t0
    print(
        f"wrote {manifest['episodes']} episodes of {', '.join(manifest['datasets'])}/"
        f"{manifest['split']} (seed {manifest['seed']}) into {manifest['num_shards']} shards "
        f"in {args.output} ({took:.1f} s, {runner.description})"
    )
    return 0


if __name__ == "__main__":
    from episodes.util.cli_errors import run_main

    sys.exit(run_main(main))
