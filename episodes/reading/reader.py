"""Episode reader: sampler descriptions -> numpy episodes (`python -m episodes.read` is its CLI).

An `EpisodeReader` turns each episode description (classes and record numbers, from
`episodes.sampling.sampler`) into arrays: images resized to `image_size` (uint8, or float32 scaled to
`float_range`), labels 0..N-1 in the order of the episode's classes, absolute class ids. Records
are fetched with one seek through the `.index` sidecars (built on first use for reference
Meta-Dataset folders), decoded by a thread pool, and the next episodes are prefetched while the
caller works. When a decoded cache for the size exists (`python -m beam_pipelines.cache`),
images are gathered from its memory maps instead. File handles and memory maps stay bounded
(LRU pools), and memory holds only the episodes in flight.

Images of an episode are ordered class by class (class 0's examples first), in the
description's record order.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from episodes.images.decoded_cache import DecodedCache, DecodedCacheError
from episodes.images.image_decode import (
    DEFAULT_RESIZE,
    RESIZE_MODES,
    ParallelismGauge,
    Task,
    chunk_ranges,
    scale_images,
    submit_jobs,
    wait_all,
)
from episodes.images.image_size_limit import MAX_IMAGE_SIDE
from episodes.images.record_images import RecordImages
from episodes.reading.decode_processes import (
    BUSY_SHARES,
    DecodeProcessPool,
    RecordSource,
    auto_decode_processes,
)
from episodes.reading.description_prefetch import DescriptionPrefetcher
from episodes.records.dataset_spec import DatasetSpec, Split
from episodes.records.reader_errors import ReaderError
from episodes.records.record_reader import RecordReader
from episodes.sampling.episode import Episode, EpisodeDescription, episode_labels
from episodes.sampling.sampler_factory import legacy_mode, load_dataset, make_sampler
from episodes.sampling.sampling_mode import SamplingMode

__all__ = [
    "CACHE_MODES",
    "DECODE_DEVICES",
    "DTYPES",
    "EpisodeReader",
    "POOL_GATHER_BYTES",
    "encoded_episode_images",
]

DTYPES = {"uint8": np.uint8, "float32": np.float32}
CACHE_MODES = ("auto", "always", "never")
DECODE_DEVICES = ("cpu", "cuda")  # cuda: opt-in nvJPEG decoding (`episodes.images.gpu_decode`)
POOL_GATHER_BYTES = 8 << 20  # decoded-cache episodes smaller than this are copied inline


class _Source:
    """One dataset: its spec, its records' images and, when present, its decoded cache."""

    def __init__(
        self,
        spec: DatasetSpec,
        max_open_files: int,
        index_cache_dir: Any,
        cache: DecodedCache | None,
        resize: str,
    ):
        self.spec = spec
        self.records = RecordReader(spec.root, spec.file_pattern, max_open_files, index_cache_dir)
        self.images = RecordImages(self.records, resize)
        self.cache = cache

    def close(self) -> None:
        self.images.close()
        if self.cache is not None:
            self.cache.close()


@dataclass
class _InFlight:
    description: EpisodeDescription
    images: np.ndarray | None  # (support + query, H, W, 3) uint8; None while workers decode
    futures: list[Task] | None = None
    ticket: Any = None  # DecodeProcessPool ticket when worker processes decode it


class EpisodeReader:
    """Episodes of one or more converted datasets as numpy arrays (see module docstring).

    `config` is an `episodes.sampling.sampler.SamplerConfig`; `sampler` may replace the default sampler
    with any object whose `.episode(i)` returns an EpisodeDescription (e.g. a FIX-ML pool
    sampler). `decoded_cache`: "auto" uses a cache when one matches, "always" requires one,
    "never" always decodes records. `num_threads` is at most that many decoding threads: the
    pool is used only while it measurably runs in parallel (`ParallelismGauge`; on one free
    core threads are slower than inline decoding); `num_threads=0` always decodes inline.
    `decode_processes=N` decodes records in N worker processes (they scale with cores where
    threads do not); the default (None) starts one per usable core, at most 8, where the
    platform allows (`decode_processes.auto_decode_processes`: not on one core, inside a
    DataLoader worker, or with too little /dev/shm, each said in one `ReaderNote` line), and 0
    decodes in the calling thread and its pool. Decoded-cache reads stay in the calling thread.
    `resize` is "reference" (Meta-Dataset's TF bilinear, align_corners; the default) or
    "antialias" (`episodes.images.image_decode`). `decode_device="cuda"` (opt-in) decodes
    JPEG records with nvJPEG and resizes them on the GPU (`episodes.images.gpu_decode`): the
    episode's images are then uint8 CUDA tensors, and their pixels differ slightly from the
    reference decoder's (docs/operations.md, "Feeding a GPU").
    `sampler_process=True` computes the descriptions of `episodes()` streams ahead in a helper
    process, leaving the calling thread only the copying (worth it for long streams from the
    decoded cache, where sampling is a third of the time; starting the helper takes ~0.3 s).
    `sampling` is the sampling mode (`episodes.sampling.modes`; None: Meta-Dataset's sampler);
    `mix_lambda` (with `base_split`) is the older spelling of FIX-ML's base/novel mixture,
    `get_mode("mixed", lam=..., base_split=...)`.
    """

    def __init__(
        self,
        dataset_dirs: str | os.PathLike | Sequence[str | os.PathLike],
        split: Split | str,
        config: Any = None,
        seed: int = 0,
        *,
        sampler: Any = None,
        image_size: int = 84,
        dtype: str = "uint8",
        float_range: tuple[float, float] = (0.0, 1.0),
        num_threads: int = 2,
        decode_processes: int | None = None,
        decode_device: str = "cpu",
        resize: str = DEFAULT_RESIZE,
        sampler_process: bool = False,
        prefetch: int = 2,
        decoded_cache: str = "auto",
        cache_root: str | os.PathLike | None = None,
        max_open_files: int = 64,
        index_cache_dir: str | os.PathLike | None = None,
        split_file: str | os.PathLike | None = None,
        num_episodes: int | None = None,
        mix_lambda: float | None = None,
        base_split: Split | str = Split.TRAIN,
        sampling: SamplingMode | None = None,
    ):
        if isinstance(dataset_dirs, str | os.PathLike):
            dataset_dirs = [dataset_dirs]
        dataset_dirs = list(dataset_dirs)
        if not dataset_dirs:
            raise ReaderError("no dataset folder given")
        if not isinstance(image_size, int) or not 1 <= image_size <= MAX_IMAGE_SIDE:
            raise ReaderError(
                f"image_size={image_size!r}: expected a positive integer up to {MAX_IMAGE_SIDE} "
                "(the image size limit of converted datasets)"
            )
        try:
            known_dtype = str(np.dtype(dtype)) in DTYPES
        except TypeError:
            known_dtype = False
        if not known_dtype:
            raise ReaderError(f"dtype={dtype!r}: expected one of {sorted(DTYPES)}")
        if resize not in RESIZE_MODES:
            raise ReaderError(f"resize={resize!r}: expected one of {RESIZE_MODES}")
        for name, value in (
            ("num_threads", num_threads),
            ("decode_processes", 0 if decode_processes is None else decode_processes),
            ("prefetch", prefetch),
        ):
            if not isinstance(value, int) or value < 0:
                raise ReaderError(f"{name}={value!r}: expected an integer >= 0")
        if decode_device not in DECODE_DEVICES:
            raise ReaderError(f"decode_device={decode_device!r}: expected one of {DECODE_DEVICES}")
        if decode_device != "cpu" and str(np.dtype(dtype)) != "uint8":
            raise ReaderError(
                f"decode_device={decode_device!r} gives uint8 images; got dtype={dtype!r} "
                "(scale on the device instead)"
            )
        if decode_device != "cpu" and resize != "reference":
            raise ReaderError(
                f"decode_device={decode_device!r} resizes like the reference; resize={resize!r} "
                "is decoded on the CPU only"
            )
        if decoded_cache not in CACHE_MODES:
            raise ReaderError(f"decoded_cache={decoded_cache!r}: expected one of {CACHE_MODES}")
        if split_file is not None and len(dataset_dirs) != 1:
            raise ReaderError("split_file applies to one dataset; got several dataset folders")
        if num_episodes is not None and num_episodes < 0:
            raise ReaderError(f"num_episodes={num_episodes}: expected >= 0 or None")
        self.split = Split.parse(split)
        self.seed = seed
        self.config = config
        self.image_size = image_size
        self.dtype = np.dtype(dtype)
        self.float_range = (float(float_range[0]), float(float_range[1]))
        self.num_threads = num_threads
        self.resize = resize
        self.sampler_process = bool(sampler_process)
        self.index_cache_dir = index_cache_dir
        self.max_open_files = max_open_files
        self.prefetch = prefetch
        self.num_episodes = num_episodes
        self.specs = [load_dataset(d, split_file) for d in dataset_dirs]
        names = [s.name for s in self.specs]
        if len(set(names)) != len(names):
            raise ReaderError(f"dataset names must differ across sources, got {names}")
        if sampling is not None and mix_lambda is not None:
            raise ReaderError("give sampling or mix_lambda (its older spelling), not both")
        mode = sampling if sampling is not None else legacy_mode(mix_lambda, base_split)
        splits = mode.splits_read(self.split)
        for spec in self.specs:
            for name in splits:
                spec.classes(name)  # raises a clear error for a spec without splits
        self._sources: dict[str, _Source] = {}
        for spec in self.specs:
            cache = self._find_cache(spec, decoded_cache, cache_root, max_open_files)
            if cache is None:
                for name in splits:
                    _check_records_exist(spec, name)
            self._sources[spec.name] = _Source(spec, max_open_files, index_cache_dir, cache, resize)
        if sampler is None:  # bad episode options fail here, before any note on decoding
            sampler = make_sampler(self.specs, self.split, config, seed, sampling=mode)
        self.sampler = sampler
        self._episode_bytes = self._largest_episode_bytes(config)
        if decode_processes is None:  # one per core, unless nothing is decoded at all
            decodes = decode_device == "cpu" and any(
                s.cache is None for s in self._sources.values()
            )
            decode_processes = (
                auto_decode_processes(self._episode_bytes, prefetch) if decodes else 0
            )
        self.decode_processes = decode_processes
        self.decode_device = decode_device
        self._gpu_decoder = None
        if decode_device != "cpu":
            from episodes.images.gpu_decode import GpuJpegDecoder

            try:  # it checks torch, CUDA and torchvision first
                self._gpu_decoder = GpuJpegDecoder(image_size, decode_device)
            except RuntimeError as exc:  # "decode_device='cuda': why not", one line
                raise ReaderError(str(exc)) from None
        self._executor: ThreadPoolExecutor | None = None
        self._executor_pid: int | None = None
        self._executor_lock = threading.Lock()
        self._gauge = ParallelismGauge(num_threads)
        self._process_pool: DecodeProcessPool | None = None
        self._process_pool_pid: int | None = None
        self._emulate_decode_s = 0.0  # benchmarks only: workers sleep instead of decoding
        self._emulate_stalls = (0.0, 0.0)  # ... and some images (share, seconds) longer

    def _largest_episode_bytes(self, config: Any) -> int:
        """Pixels of the largest episode `config` can give (sizes the shared memory needed)."""
        from episodes.sampling.sampler_config import SamplerConfig

        if not isinstance(config, SamplerConfig):
            config = SamplerConfig()
        ways = config.largest_ways
        shots, query = config.fixed_shots, config.fixed_query
        support = ways * shots if shots is not None else config.max_support_size
        images = support + ways * (query if query is not None else config.max_query_per_class)
        return images * self.image_size * self.image_size * 3 * self.dtype.itemsize

    def _find_cache(self, spec, mode, cache_root, max_open) -> DecodedCache | None:
        if mode == "never":
            return None
        try:
            cache = DecodedCache.find(spec, self.image_size, cache_root, max_open, self.resize)
        except DecodedCacheError as exc:
            if mode == "always":
                raise
            warnings.warn(f"ignoring decoded cache: {exc}", stacklevel=3)
            return None
        if cache is None and mode == "always":
            raise DecodedCacheError(
                f"{spec.root}: no decoded cache for {self.image_size}x{self.image_size} "
                f"(write one with: python -m beam_pipelines.cache --dataset {spec.root} "
                f"--image-size {self.image_size})"
            )
        return cache

    # -- descriptions -------------------------------------------------------------------

    @property
    def uses_decoded_cache(self) -> bool:
        return all(s.cache is not None for s in self._sources.values())

    def spec(self, source: str) -> DatasetSpec:
        return self._source(source).spec

    def _source(self, name: str) -> _Source:
        try:
            return self._sources[name]
        except KeyError:
            raise ReaderError(
                f"episode source {name!r} is not among the reader's datasets {sorted(self._sources)}"
            ) from None

    def describe(self, index: int) -> EpisodeDescription:
        """Description of episode `index` (pure function of spec, split, config, seed, index)."""
        return self.sampler.episode(index)

    # -- reading ------------------------------------------------------------------------

    def _pool(self) -> ThreadPoolExecutor | None:
        if self.num_threads == 0:
            return None
        with self._executor_lock:
            if self._executor is None or self._executor_pid != os.getpid():
                self._executor = ThreadPoolExecutor(self.num_threads, thread_name_prefix="decode")
                self._executor_pid = os.getpid()
            return self._executor

    def _processes(self) -> DecodeProcessPool:
        if self._process_pool is None or self._process_pool_pid != os.getpid():
            sources = {
                name: RecordSource(
                    str(source.spec.root),
                    source.spec.file_pattern,
                    None if self.index_cache_dir is None else str(self.index_cache_dir),
                    self.max_open_files,
                )
                for name, source in self._sources.items()
            }
            self._process_pool = DecodeProcessPool(
                self.decode_processes,
                sources,
                self.image_size,
                self.resize,
                segment_bytes=self._episode_bytes,
                spare_segments=2,
                dtype=self.dtype.str,
                float_range=self.float_range,
                emulate_decode_s=self._emulate_decode_s,
                emulate_stalls=self._emulate_stalls,
            )
            self._process_pool_pid = os.getpid()
        return self._process_pool

    @staticmethod
    def _rows(description: EpisodeDescription) -> list[tuple[int, int, int]]:
        """(row, class id, record) of every image: support class by class, then query."""
        rows: list[tuple[int, int, int]] = []
        for groups in (description.support, description.query):
            for class_id, records in zip(description.class_ids, groups):
                row = len(rows)
                rows.extend((row + i, class_id, k) for i, k in enumerate(records))
        return rows

    def _start(self, description: EpisodeDescription, pipelined: bool = True) -> _InFlight:
        """Start filling the episode's image array: from the decoded cache, on worker
        processes, on the thread pool, or inline."""
        source = self._source(description.source)
        size = self.image_size
        total = description.support_size + description.query_size
        if source.cache is None and self._gpu_decoder is not None:
            return _InFlight(description, self._decode_on_gpu(source, description))
        if source.cache is None and self.decode_processes > 0:
            rows = self._rows(description)
            source.images.check_rows(rows)  # index errors and bad records, raised here
            ticket = self._processes().submit(description.source, rows, total)
            return _InFlight(description, None, ticket=ticket)
        images = np.empty((total, size, size, 3), np.uint8)
        pool = self._pool()
        if source.cache is not None:
            cache = source.cache
            pieces = []  # (class id, records, first row)
            start = 0
            for groups in (description.support, description.query):
                for class_id, records in zip(description.class_ids, groups):
                    pieces.append((class_id, records, start))
                    start += len(records)

            def gather(group: Sequence[tuple[int, Sequence[int], int]]) -> None:
                cache.gather_many(group, images)

            if pool is None or not pipelined or images.nbytes < POOL_GATHER_BYTES:
                gather(pieces)  # small copies: a thread hand-off would cost more than it saves
                return _InFlight(description, images, None)
            # Large copies (numpy releases the GIL) run on the pool, split into about equal
            # halves, while the caller's thread samples the next descriptions.
            groups = _balanced_groups(pieces, total, self.num_threads)
            jobs = [functools.partial(gather, g) for g in groups]
            return _InFlight(description, images, submit_jobs(pool, jobs))
        rows = self._rows(description)
        mode, synchronous, timed = (
            ("inline", True, False) if pool is None else self._gauge.next_episode()
        )
        t0 = time.perf_counter()
        if mode == "inline":
            source.images.decode_rows(rows, images)
            futures = None
        else:
            jobs = [
                functools.partial(source.images.decode_rows, rows[c.start : c.stop], images)
                for c in chunk_ranges(len(rows), 4 * self.num_threads)
            ]
            futures = submit_jobs(pool, jobs)
            if synchronous:
                wait_all(futures)
                futures = None
        if timed:
            self._gauge.record(mode, len(rows), time.perf_counter() - t0)
        return _InFlight(description, images, futures)

    def _decode_on_gpu(self, source: _Source, description: EpisodeDescription) -> Any:
        """The episode's images decoded on the GPU, a (total, S, S, 3) uint8 CUDA tensor; a
        batch nvJPEG refuses is decoded on the CPU (which names a bad record) and copied up."""
        rows = self._rows(description)
        source.images.check_rows(rows)
        encoded = [source.images.encoded(c, k) for _, c, k in rows]
        try:
            return self._gpu_decoder.decode(encoded)
        except RuntimeError:
            import torch

            size = self.image_size
            host = np.empty((len(rows), size, size, 3), np.uint8)
            source.images.decode_rows(rows, host)  # raises CorruptRecordError where one is
            return torch.from_numpy(host).to(self.decode_device)

    def _finish(self, flight: _InFlight) -> Episode:
        if flight.images is not None and not isinstance(flight.images, np.ndarray):
            return self._episode(flight.description, flight.images)  # uint8 on the GPU
        if flight.ticket is not None:
            images = self._processes().collect(flight.ticket)  # scaled by the workers
        else:
            wait_all(flight.futures)
            images = scale_images(flight.images, self.dtype, self.float_range)
        return self._episode(flight.description, images)

    def _episode(self, d: EpisodeDescription, images: Any) -> Episode:
        s_labels, s_ids, q_labels, q_ids = episode_labels(d)
        n_support = len(s_labels)
        names = self._source(d.source).spec.class_names
        return Episode(
            support_images=images[:n_support],
            support_labels=s_labels,
            support_class_ids=s_ids,
            query_images=images[n_support:],
            query_labels=q_labels,
            query_class_ids=q_ids,
            source=d.source,
            split=d.split.value,
            episode_index=d.episode_index,
            class_names=tuple(names[c] for c in d.class_ids),
        )

    def read(self, description: EpisodeDescription) -> Episode:
        """Pixels and labels of one description."""
        return self._finish(self._start(description, pipelined=False))

    def episode(self, index: int) -> Episode:
        return self.read(self.describe(index))

    def read_many(self, descriptions: Iterable[EpisodeDescription]) -> Iterator[Episode]:
        """Episodes of `descriptions`, in order, with up to `prefetch` more being decoded (more
        while decode processes would otherwise idle: `_deepen`)."""
        pending: deque[_InFlight] = deque()
        try:
            for description in descriptions:
                flight = self._start(description)
                if not pending and flight.futures is None and flight.ticket is None:
                    # Filled already (decoded-cache copy, inline decode): holding it back would
                    # only keep more arrays alive, and cold ones cost memory bandwidth.
                    yield self._finish(flight)
                    continue
                pending.append(flight)
                if len(pending) > self.prefetch and not self._deepen(pending):
                    yield self._finish(pending.popleft())
            while pending:
                yield self._finish(pending.popleft())
        finally:
            for flight in pending:
                for future, _ in flight.futures or ():
                    future.cancel()
                if flight.ticket is not None and self._process_pool is not None:
                    self._process_pool.discard(flight.ticket)

    def _deepen(self, pending: deque[_InFlight]) -> bool:
        """Whether to start one more episode before handing out the oldest, beyond `prefetch`:
        while decode processes have idle workers (`DecodeProcessPool.hungry`), up to
        `prefetch` + `BUSY_SHARES` per process in flight. Keeping N workers busy takes several
        episodes in flight (each decoded by a few of them, `decode_processes.share_count`);
        with only `prefetch` + 1, the rate stopped growing with N."""
        pool = self._process_pool
        if pool is None or pending[-1].ticket is None:
            return False
        most = self.prefetch + BUSY_SHARES * self.decode_processes
        return len(pending) <= most and pool.hungry()

    def episodes(self, start: int = 0, count: int | None = None) -> Iterator[Episode]:
        """Episodes start, start+1, ... (`count` of them, or without end when None)."""
        if self.sampler_process:
            stop = None if count is None else start + count
            return self._from_prefetcher(DescriptionPrefetcher(self.sampler, start, stop))
        indices = itertools.count(start) if count is None else range(start, start + count)
        return self.read_many(self.describe(i) for i in indices)

    def _from_prefetcher(self, prefetcher: DescriptionPrefetcher) -> Iterator[Episode]:
        try:
            yield from self.read_many(prefetcher)
        finally:
            prefetcher.close()

    def __iter__(self) -> Iterator[Episode]:
        return self.episodes(0, self.num_episodes)

    def encoded_images(self, description: EpisodeDescription) -> tuple[list[bytes], list[bytes]]:
        """Encoded bytes of the support and query records, as stored (no decoding)."""
        return encoded_episode_images(description, self._source(description.source).images.encoded)

    @property
    def open_files(self) -> int:
        return sum(s.records.open_files for s in self._sources.values())

    def close(self) -> None:
        if self._executor is not None and self._executor_pid == os.getpid():
            self._executor.shutdown(wait=True, cancel_futures=True)
        self._executor = None
        if self._process_pool is not None and self._process_pool_pid == os.getpid():
            self._process_pool.close()
        self._process_pool = None
        for source in self._sources.values():
            source.close()

    def __enter__(self) -> EpisodeReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _balanced_groups(pieces: list, total: int, parts: int) -> list[list]:
    """Split consecutive (class, records, first row) pieces into <= `parts` groups of about
    equal image counts (at least 32 images per group, so small episodes stay one task)."""
    target = max(32, -(-total // max(1, parts)))
    groups: list[list] = [[]]
    count = 0
    for piece in pieces:
        if count >= target and len(groups) < parts:
            groups.append([])
            count = 0
        groups[-1].append(piece)
        count += len(piece[1])
    return groups


def _check_records_exist(spec: DatasetSpec, split: Split) -> None:
    missing = [c for c in spec.classes(split) if not spec.records_path(c).exists()]
    if missing:
        raise ReaderError(
            f"dataset {spec.name!r}: {len(missing)} record files of the {split.value} split are "
            f"missing, e.g. {spec.records_path(missing[0])}"
        )


def encoded_episode_images(
    description: EpisodeDescription, encoded: Callable[[int, int], bytes]
) -> tuple[list[bytes], list[bytes]]:
    """The support and query images of `description` as stored, in episode order, from
    `encoded(class_id, record)` (a local reader's or a remote one's)."""
    support, query = (
        [encoded(c, k) for c, records in zip(description.class_ids, groups) for k in records]
        for groups in (description.support, description.query)
    )
    return support, query
