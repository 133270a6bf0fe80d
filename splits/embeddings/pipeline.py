"""The class-embedding Beam pipeline: each class's mean feature vector (ATG eq. 4).

The class embedding phi_i is the average of phi(x) over every image x of class i (Arnold & Sha,
sec. 4), phi being a backbone without its last layer (`splits.embeddings.feature_extractor`).

Create(chunks: a class's records split into runs of at most `chunk_size`) -> EmbedClasses
(EmbedChunks: the model loaded once per worker; records read with one seek, decoded and resized,
embedded in batches; per-chunk float64 sums -> CombinePerKey adding partial sums in chunk order)
-> GroupForSums (the class sums and skipped records gathered under one key) -> WriteClassSums
(sums, counts and skipped records for the driver), then the driver writes the npz
(`splits.embeddings.embeddings_file`) atomically. No tagged outputs and no side inputs (as in
beam_pipelines.conversion.writer): each step's elements are (kind, value) pairs, so every Beam runner
(Dask's included, which hands every tagged output to every consumer) routes them alike. Chunks and batches do not depend on
the worker count and sums are added in a fixed order, so 1 or N workers give the same matrix.
Lives apart from the CLI so that Beam workers unpickle its classes by module name.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems

from beam_pipelines.conversion.writer import GatherUnderOneKey, of_kind, values_by_kind
from beam_pipelines.runners.interrupt_exit import exit_on_interrupt
from beam_pipelines.runners.job_faults import unwritable_output_in_one_line
from beam_pipelines.runners.options import RunnerChoice
from beam_pipelines.runners.output_lock import acquire_output_lock, clear_remote_leftovers
from episodes.records.dataset_spec import DatasetSpec, SpecError, load_spec
from episodes.records.local_dataset import require_local_dataset
from episodes.storage import paths as storage_paths
from episodes.util.atomic_files import missing_parents, remove_if_empty, staging_folder
from episodes.util.cli_errors import UserError
from episodes.util.dead_job_leftovers import clear_leftovers
from episodes.util.progress_lines import ProgressLines
from splits.embeddings.embeddings_file import EmbeddingsFile

__all__ = [
    "CLASS_SUM",
    "Chunk",
    "EmbedChunksFn",
    "EmbedClasses",
    "EmbedError",
    "EmbedOptions",
    "EmbedReport",
    "OrderedSumFn",
    "PARTIAL_SUM",
    "SKIPPED",
    "SKIPPED_FILE",
    "SUMS_FILE",
    "WriteClassSums",
    "check_class_images",
    "check_dataset",
    "check_output",
    "check_remote_dataset",
    "embed_dataset",
    "plan_chunks",
    "save_remote",
    "write_class_sums",
    "write_gathered_class_sums",
]

SKIPPED = "skipped"
PARTIAL_SUM = "partial"
CLASS_SUM = "class"
SUMS_FILE = "class_sums.npz"
SKIPPED_FILE = "skipped.json"


class EmbedError(UserError, ValueError):
    """Inputs or results of an embedding job that cannot give a valid embeddings file."""


class Chunk(NamedTuple):
    """Records start..stop-1 of one class; `index` orders partial sums deterministically."""

    index: int
    class_id: int
    start: int
    stop: int


@dataclass(frozen=True)
class EmbedOptions:
    """Batching, placement and reporting of the embedding job."""

    batch_size: int = 64
    chunk_size: int = 256
    device: str = "auto"
    # Threads per worker: parallelism comes from Beam workers; torch's intra-op threads at
    # these batch sizes are slower on a busy CPU (28px cnn4: 598 vs 123 img/s). 0: torch's.
    torch_threads: int = 1
    progress: bool = True
    progress_every_s: float = 10.0

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.chunk_size < 1:
            raise EmbedError(
                f"--batch-size {self.batch_size} and --chunk-size {self.chunk_size}: expected >= 1"
            )
        if self.torch_threads < 0:
            raise EmbedError(f"--torch-threads {self.torch_threads}: expected >= 0")


@dataclass
class EmbedReport:
    output: Path | str
    classes: int
    images: int
    dim: int
    model: str
    weights_hash: str
    seconds: float
    skipped: list[dict[str, Any]]
    runner: str

    def summary(self) -> str:
        rate = self.images / max(self.seconds, 1e-9)
        line = (
            f"wrote {self.output}: {self.classes} classes x {self.dim} dims from "
            f"{self.images:,} images in {self.seconds:.1f}s ({rate:,.0f} img/s, {self.runner}); "
            f"model {self.model}, weights {self.weights_hash[:19]}"
        )
        if self.skipped:
            shown = "; ".join(
                f"{s['path']} record {s['record']}: {s['reason']}" for s in self.skipped[:5]
            )
            line += f"\nskipped {len(self.skipped)} unreadable records: {shown}"
        return line


def plan_chunks(images_per_class: Sequence[int], chunk_size: int) -> list[Chunk]:
    """Split every class's records into contiguous chunks of at most `chunk_size`."""
    chunks: list[Chunk] = []
    for class_id, count in enumerate(images_per_class):
        for start in range(0, int(count), chunk_size):
            chunks.append(Chunk(len(chunks), class_id, start, min(start + chunk_size, count)))
    return chunks


class EmbedChunksFn(beam.DoFn):
    """Chunk -> ("partial", (class id, (chunk index, float64 feature sum, image count))).

    The model is loaded once per worker in `setup`; unreadable records are emitted as
    ("skipped", {path, record, reason}) and left out of the sum."""

    def __init__(
        self,
        dataset_dir: str,
        file_pattern: str,
        checkpoint: str,
        options: EmbedOptions,
        expected_images: int,
        workers: int,
    ):
        self.dataset_dir = dataset_dir
        self.file_pattern = file_pattern
        self.checkpoint = checkpoint
        self.options = options
        self.expected_images = expected_images
        self.workers = max(1, workers)

    def setup(self) -> None:
        import torch

        from episodes.records.record_reader import RecordReader
        from learners.training.device import resolve_device
        from splits.embeddings.feature_extractor import load_feature_extractor

        if self.options.torch_threads:
            torch.set_num_threads(self.options.torch_threads)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        self.device = resolve_device(self.options.device)
        self.model, self.normalization, self.info = load_feature_extractor(
            self.checkpoint, self.device
        )
        if storage_paths.is_remote(self.dataset_dir):  # ranged reads of the class objects
            from episodes.storage.remote_records import RemoteRecordReader

            self.reader = RemoteRecordReader(self.dataset_dir, self.file_pattern)
        else:
            self.reader = RecordReader(self.dataset_dir, self.file_pattern)
        self.progress = ProgressLines(
            f"embed pid {os.getpid()}",
            self.expected_images // self.workers,
            "images",
            self.options.progress_every_s,
            self.options.progress,
        )
        self.classes_begun: set[int] = set()

    def teardown(self) -> None:
        reader = getattr(self, "reader", None)
        if reader is not None:
            reader.close()

    def _read(
        self, class_id: int, records: range
    ) -> tuple[list[tuple[int, bytes]], list[dict[str, Any]]]:
        """(record number, encoded image) of readable records whose label is the class's."""
        from episodes.records.record_index import RecordIndexError
        from episodes.records.record_reader import CorruptRecordError

        path = str(self.reader.records_path(class_id))
        kept, skipped = [], []
        for k in records:
            try:
                image, label = self.reader.read_example(class_id, k)
            except (CorruptRecordError, RecordIndexError, IndexError, OSError) as exc:
                skipped.append({"path": path, "record": k, "reason": str(exc)})
                continue
            if label != class_id:
                reason = f"label {label}, but the file holds class {class_id}"
                skipped.append({"path": path, "record": k, "reason": reason})
                continue
            kept.append((k, image))
        return kept, skipped

    def _decode(
        self, class_id: int, encoded: list[tuple[int, bytes]]
    ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """Decode and resize to the backbone's image size; undecodable records are skipped."""
        from episodes.images.image_decode import ImageDecodeError, decode_image_into

        size = self.info.image_size
        out = np.empty((len(encoded), size, size, 3), dtype=np.uint8)
        keep, skipped = [], []
        for i, (k, data) in enumerate(encoded):
            try:
                decode_image_into(data, out[i])
                keep.append(i)
            except ImageDecodeError as exc:
                path = str(self.reader.records_path(class_id))
                skipped.append({"path": path, "record": k, "reason": str(exc)})
        return (out if len(keep) == len(out) else out[keep]), skipped

    def _feature_sum(self, images: np.ndarray) -> np.ndarray:
        """Sum over the batch of the backbone's features, in float64 (numpy: a fixed order)."""
        import torch

        from learners.feed.episode_batch import images_to_tensor

        with torch.inference_mode():
            inputs = images_to_tensor(images, self.device, self.normalization)
            features = self.model(inputs).float().cpu().numpy()
        return features.astype(np.float64).sum(axis=0)

    def process(self, chunk: Chunk) -> Iterator[Any]:
        total = np.zeros(self.info.feature_dim, dtype=np.float64)
        count = 0
        for start in range(chunk.start, chunk.stop, self.options.batch_size):
            records = range(start, min(start + self.options.batch_size, chunk.stop))
            encoded, unreadable = self._read(chunk.class_id, records)
            images, undecodable = self._decode(chunk.class_id, encoded)
            for entry in unreadable + undecodable:
                yield SKIPPED, entry
            if len(images):
                total += self._feature_sum(images)
                count += len(images)
        self.classes_begun.add(chunk.class_id)
        self.progress.advance(count, f"{len(self.classes_begun):,} classes begun")
        yield PARTIAL_SUM, (chunk.class_id, (chunk.index, total, count))


class OrderedSumFn(beam.CombineFn):
    """Adds a class's per-chunk (index, sum, count) in chunk order, whatever order and worker
    they arrive from, so the float64 result does not depend on the runner."""

    def create_accumulator(self) -> list:
        return []

    def add_input(self, accumulator: list, value: tuple) -> list:
        accumulator.append(value)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[list]) -> list:
        merged: list = []
        for accumulator in accumulators:
            merged.extend(accumulator)
        return merged

    def extract_output(self, accumulator: list) -> tuple[np.ndarray, int]:
        ordered = sorted(accumulator, key=lambda value: value[0])
        total = np.array(ordered[0][1], dtype=np.float64)
        count = int(ordered[0][2])
        for _, partial, partial_count in ordered[1:]:
            total += partial
            count += int(partial_count)
        return total, count


class EmbedClasses(beam.PTransform):
    """Chunks -> one collection of ("class", (class id, (float64 feature sum, images))) and
    ("skipped", record) elements."""

    def __init__(self, embed_fn: EmbedChunksFn):
        super().__init__()
        self.embed_fn = embed_fn

    def expand(self, chunks: beam.PCollection) -> beam.PCollection:
        results = chunks | "Spread" >> beam.Reshuffle() | "EmbedChunks" >> beam.ParDo(self.embed_fn)
        sums = (
            results
            | "KeepPartialSums" >> beam.FlatMap(of_kind, PARTIAL_SUM)
            | "SumInChunkOrder" >> beam.CombinePerKey(OrderedSumFn())
            | "KindSums" >> beam.Map(lambda class_sum: (CLASS_SUM, class_sum))
        )
        skipped = results | "KeepSkipped" >> beam.Filter(lambda element: element[0] == SKIPPED)
        return (sums, skipped) | "SumsAndSkipped" >> beam.Flatten()


class WriteClassSums(beam.PTransform):
    """("class", ...) and ("skipped", ...) elements -> the job's one output element, written
    into `work_dir` (`write_class_sums`) from a single group, after every class was summed."""

    def __init__(self, work_dir: str):
        super().__init__()
        self.work_dir = work_dir

    def expand(self, results: beam.PCollection) -> beam.PCollection:
        return (
            (results,)
            | "GroupForSums" >> GatherUnderOneKey()
            | "WriteSums" >> beam.Map(write_gathered_class_sums, self.work_dir)
        )


def write_gathered_class_sums(
    gathered: tuple[Any, Iterable[tuple[str, Any]]], work_dir: str
) -> int:
    """`write_class_sums` from the one group of (kind, value) elements."""
    sums, skipped = values_by_kind(gathered[1], CLASS_SUM, SKIPPED)
    return write_class_sums(sums, skipped, work_dir)


def write_class_sums(
    sums: list[tuple[int, tuple[np.ndarray, int]]], skipped: list[dict], work_dir: str
) -> int:
    """Sums and counts by class id as an npz, skipped records as JSON, into `work_dir` (a
    local folder, or a prefix in object storage that the launcher reads back)."""
    ordered = sorted(sums, key=lambda item: item[0])
    class_ids = np.asarray([c for c, _ in ordered], dtype=np.int64)
    matrix = np.stack([s for _, (s, _) in ordered]) if ordered else np.zeros((0, 0))
    counts = np.asarray([n for _, (_, n) in ordered], dtype=np.int64)
    buffer = io.BytesIO()
    np.savez(buffer, class_ids=class_ids, sums=matrix, counts=counts)
    storage_paths.write_bytes(storage_paths.join(work_dir, SUMS_FILE), buffer.getvalue())
    rows = sorted(skipped, key=lambda s: (s["path"], s["record"]))
    text = json.dumps(rows, indent=1) + "\n"
    storage_paths.write_bytes(storage_paths.join(work_dir, SKIPPED_FILE), text.encode())
    return len(ordered)


def check_dataset(dataset_dir: str | os.PathLike) -> DatasetSpec:
    """The dataset's spec, after checking every class has images and a records file. A URL
    (s3://, gs://) is checked by one listing; give the store's options first
    (`storage_paths.use_options`)."""
    if storage_paths.is_remote(dataset_dir):
        return check_remote_dataset(str(dataset_dir))
    try:
        require_local_dataset(dataset_dir)
    except SpecError as exc:
        raise EmbedError(f"--dataset {exc}") from None
    path = Path(dataset_dir)
    if not path.is_dir():
        raise EmbedError(f"--dataset {path}: no such folder (expected a converted dataset)")
    try:
        spec = load_spec(path)
    except SpecError as exc:
        raise EmbedError(f"--dataset {path}: {exc}") from None
    check_class_images(spec, str(path))
    missing = [c for c in range(spec.num_classes) if not spec.records_path(c).is_file()]
    if missing:
        raise EmbedError(
            f"--dataset {path}: {len(missing)} records files missing, e.g. "
            f"{spec.records_path(missing[0])}"
        )
    return spec


def check_remote_dataset(url: str) -> DatasetSpec:
    """`check_dataset` of a dataset folder in object storage (the workers read it there)."""
    from episodes.storage.remote_records import load_remote_dataset, missing_records

    try:
        spec, listing = load_remote_dataset(url)
    except SpecError as exc:
        raise EmbedError(f"--dataset {exc}") from None
    check_class_images(spec, url)
    missing = missing_records(spec, listing, range(spec.num_classes))
    if missing:
        raise EmbedError(
            f"--dataset {url}: {len(missing)} records objects missing, e.g. "
            f"{storage_paths.join(url, missing[0])}"
        )
    return spec


def check_class_images(spec: DatasetSpec, where: str) -> None:
    empty = [n for n, k in zip(spec.class_names, spec.images_per_class) if k < 1]
    if empty:
        raise EmbedError(
            f"--dataset {where}: {len(empty)} classes have no images (e.g. {empty[:3]}); "
            "a class embedding is a mean over at least one image"
        )


def check_output(output: str | os.PathLike, overwrite: bool = True) -> Path | str:
    """`output` as a Path or URL once it names a .npz that may be written: an existing file
    only with `overwrite` (the CLI's --overwrite)."""
    if storage_paths.is_remote(output):  # one object, written whole at the end
        if not str(output).endswith(".npz"):
            raise EmbedError(f"--output {output}: expected a .npz object name")
        if not overwrite and FileSystems.exists(str(output)):
            raise EmbedError(f"--output {output}: exists (add --overwrite to replace it)")
        return str(output)
    output = Path(output)
    if output.suffix != ".npz":
        raise EmbedError(f"--output {output}: expected a .npz file name")
    if output.is_dir():
        raise EmbedError(f"--output {output} is a folder; expected a .npz file name")
    if not overwrite and output.exists():
        raise EmbedError(f"--output {output}: exists (add --overwrite to replace it)")
    return output


def save_remote(result: EmbeddingsFile, url: str, class_names: list[str]) -> None:
    """Write the npz as one object (visible only once whole: the object is its own commit
    marker), after checking a local copy reads back."""
    with tempfile.TemporaryDirectory(prefix="fewshot-embed-") as tmp:
        local = Path(tmp, "embeddings.npz")
        result.save(local)
        EmbeddingsFile.load(local).check_class_names(class_names)
        storage_paths.write_bytes(url, local.read_bytes())


def embed_dataset(
    dataset_dir: str | os.PathLike,
    checkpoint: str | os.PathLike,
    output: str | os.PathLike,
    runner: RunnerChoice,
    options: EmbedOptions = EmbedOptions(),
    workers: int = 1,
    exit_on_ctrl_c: bool = False,
) -> EmbedReport:
    """Embed every class of a converted dataset with a learners checkpoint; write the npz.

    Inputs are checked (and the model loaded once on the driver for its hash) before the
    pipeline starts; the npz is written atomically at the end. A local output is locked for the
    job and the work folders killed jobs left beside it are removed first; `exit_on_ctrl_c` (the
    CLI): Ctrl-C or SIGTERM during the pipeline removes the work folder and ends the process in
    one line (beam_pipelines.runners.interrupt_exit)."""
    from splits.embeddings.feature_extractor import CheckpointError, load_feature_extractor

    output = check_output(output)
    remote_dataset = storage_paths.is_remote(dataset_dir)
    if remote_dataset:
        storage_paths.use_options(runner.options)
        runner.check_storage(dataset_dir)
    spec = check_dataset(dataset_dir)
    location = str(dataset_dir).rstrip("/") if remote_dataset else str(spec.root)
    try:
        _, _, info = load_feature_extractor(checkpoint, "cpu")
    except CheckpointError as exc:  # the --model the user gave (a ValueError in learners)
        raise EmbedError(str(exc)) from None
    chunks = plan_chunks(spec.images_per_class, options.chunk_size)
    embed_fn = EmbedChunksFn(
        location, spec.file_pattern, info.checkpoint, options, spec.total_images, workers
    )
    if options.progress:
        print(
            f"[embed] {spec.num_classes:,} classes, {spec.total_images:,} images in "
            f"{len(chunks):,} chunks of {location} with {info.name}; {runner.description}",
            file=sys.stderr,
            flush=True,
        )
    remote = storage_paths.is_remote(output)
    created = [] if remote else missing_parents(output)  # removed again if the job fails
    try:
        # a full disk or unwritable folder: one line naming the output, Beam's tracebacks dropped
        with unwritable_output_in_one_line(output):
            return _embed_to(spec, info, chunks, embed_fn, output, runner, exit_on_ctrl_c, created)
    except BaseException:
        remove_if_empty(created)
        raise


def _embed_to(spec, info, chunks, embed_fn, output, runner, exit_on_ctrl_c, created):
    remote = storage_paths.is_remote(output)
    with ExitStack() as held:
        held.callback(remove_if_empty, created)  # after a Ctrl-C too (the lock goes first)
        if remote:
            storage_paths.use_options(runner.options)
            clear_remote_leftovers(str(output))  # what killed embed jobs left beside it
            # the sums beside the output, where any runner's workers and the launcher reach them
            work_dir = storage_paths.staging_prefix(str(output))
        else:
            lock = held.enter_context(acquire_output_lock(output))  # one job per output
            clear_leftovers(lock, lock.output, "embed job")
            work_dir = str(staging_folder(output))  # .NAME.tmp-PID-HEX8, as remove_leftovers finds
        return _embed_locked(
            spec, info, chunks, embed_fn, output, runner, work_dir, exit_on_ctrl_c, held
        )


def _discard_work_dir(work_dir: str, remote: bool) -> None:
    """Remove the job's class sums (a prefix beside an object-store output, or a folder)."""
    if remote:
        storage_paths.discard_prefix(work_dir)
    else:
        shutil.rmtree(work_dir, ignore_errors=True)


def _embed_locked(spec, info, chunks, embed_fn, output, runner, work_dir, exit_on_ctrl_c, held):
    remote = storage_paths.is_remote(output)

    def stop() -> None:  # Ctrl-C or SIGTERM: the process ends after this
        _discard_work_dir(work_dir, remote)
        held.close()

    guard = nullcontext()
    if exit_on_ctrl_c:
        kept = "is as it was" if not remote and output.exists() else "was not written"
        guard = exit_on_interrupt(stop, f"interrupted: embed job stopped; {output} {kept}")
    began = time.monotonic()
    try:
        with guard, beam.Pipeline(runner=runner.runner, options=runner.options) as pipeline:
            _ = (
                pipeline
                | "Chunks" >> beam.Create(chunks, reshuffle=False)
                | "EmbedClasses" >> EmbedClasses(embed_fn)
                | "WriteClassSums" >> WriteClassSums(work_dir)
            )
        sums_file = io.BytesIO(storage_paths.read_bytes(storage_paths.join(work_dir, SUMS_FILE)))
        with np.load(sums_file) as data:
            class_ids, sums, counts = data["class_ids"], data["sums"], data["counts"]
        skipped = json.loads(storage_paths.read_bytes(storage_paths.join(work_dir, SKIPPED_FILE)))
    finally:
        _discard_work_dir(work_dir, remote)
    seconds = time.monotonic() - began
    full_sums = np.zeros((spec.num_classes, info.feature_dim), dtype=np.float64)
    full_counts = np.zeros(spec.num_classes, dtype=np.int64)
    if len(class_ids):
        full_sums[class_ids] = sums
        full_counts[class_ids] = counts
    empty = [spec.class_names[c] for c in np.flatnonzero(full_counts == 0)]
    if empty:
        raise EmbedError(
            f"{len(empty)} classes have no readable images (e.g. {empty[:3]}); skipped records: "
            + "; ".join(f"{s['path']} record {s['record']}: {s['reason']}" for s in skipped[:3])
        )
    means = (full_sums / full_counts[:, None]).astype(np.float32)
    result = EmbeddingsFile(spec.class_names, means, info.name, info.weights_hash, str(output))
    if remote:
        save_remote(result, str(output), spec.class_names)
    else:
        result.save(output)
        EmbeddingsFile.load(output).check_class_names(spec.class_names)
    return EmbedReport(
        output=output,
        classes=spec.num_classes,
        images=int(full_counts.sum()),
        dim=info.feature_dim,
        model=info.name,
        weights_hash=info.weights_hash,
        seconds=seconds,
        skipped=skipped,
        runner=runner.description,
    )
