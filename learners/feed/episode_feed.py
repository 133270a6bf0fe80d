"""The training loop's feed: episodes (or batches) read ahead in background worker processes,
handed over as tensors, pinned on CUDA so `non_blocking` copies overlap the step.

Item i of a training stream is a pure function of (source, i), so DataLoader worker w of W reads
items start+w, start+w+W, ... and the DataLoader returns them in order: the loop gets exactly the
items it would read inline, whatever `loader_workers` (and a resumed run continues the same
stream). Workers start with `forkserver` (`spawn` where there is none; never `fork`, unsafe in
a process that runs threads) and build their own source from a picklable opener. A worker's
error reaches the training process as the same exception with its one-line message; Ctrl-C and
errors shut the workers down (the generator's `finally`). Sources read front to back (episode
shards) get at most one worker. With `loader_workers=0` the training process reads, through the
reader's own decode processes when it has them (`--decode-processes`).
"""

from __future__ import annotations

import functools
import itertools
import multiprocessing
import os
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from episodes.reading.reader import DECODE_DEVICES
from episodes.sampling.episode import ARRAY_FIELDS
from learners import LearnerConfigError
from learners.feed.device_prefetch import prefetch_to_device
from learners.feed.episode_batch import episode_field
from learners.feed.episode_source import SYNTHETIC, close_source

__all__ = [
    "check_decode_device",
    "check_throughput_options",
    "exit_with_trainer",
    "feed",
    "feed_workers",
    "FeedConfig",
    "item_tensors",
    "make_loader",
    "StreamDataset",
    "TRAINER_POLL_S",
    "wants_pinned_memory",
    "worker_context",
    "WorkerFailure",
]


@dataclass(frozen=True)
class FeedConfig:
    """`loader_workers` DataLoader processes (0: read in the training process), each keeping
    `prefetch` items ready."""

    loader_workers: int = 0
    prefetch: int = 2

    def __post_init__(self) -> None:
        if self.loader_workers < 0:
            raise LearnerConfigError(f"--loader-workers {self.loader_workers}: expected >= 0")
        if self.prefetch < 1:
            raise ValueError(f"prefetch {self.prefetch}: expected >= 1")


@dataclass
class WorkerFailure:
    """An exception raised in a loader worker, carried to the training process as an item."""

    error: BaseException


def wants_pinned_memory(device: torch.device) -> bool:
    """Page-locked host tensors only help (and only work) for copies to a CUDA device."""
    return device.type == "cuda"


def worker_context() -> multiprocessing.context.BaseContext:
    """`forkserver` (else `spawn`). A forkserver started here preloads torch and the sources,
    so each worker forks from an imported process instead of importing torch again."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])  # no effect once a forkserver runs
    return context


def _images(array: Any) -> torch.Tensor:
    if isinstance(array, torch.Tensor):  # decoded on the GPU already (`decode_device="cuda"`)
        return array.contiguous()
    return torch.from_numpy(np.ascontiguousarray(array))


def item_tensors(item: Any) -> Any:
    """An episode (dict or object) -> dict of its arrays plus `source`; a batch
    (images, class ids) -> a tuple. Images become CPU tensors sharing the numpy memory (what a
    worker passes through shared memory and the pin thread pins); labels and ids stay small
    numpy arrays, pickled with the item instead of costing a shared segment each."""
    if isinstance(item, tuple):
        images, class_ids = item
        return _images(images), np.ascontiguousarray(class_ids)
    out: dict[str, Any] = {
        name: (_images if name.endswith("_images") else np.ascontiguousarray)(
            episode_field(item, name)
        )
        for name in ARRAY_FIELDS
    }
    out["source"] = str(item.get("source", "") if isinstance(item, dict) else item.source)
    return out


def _as_is(item: Any) -> Any:
    """The DataLoader's collate function: items are already what the loop takes."""
    return item


def _portable(error: BaseException) -> BaseException:
    """`error` itself when it survives pickling, else a RuntimeError with its message."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")


class StreamDataset(IterableDataset):
    """Items start, start+1, ... of a source; in a worker, that worker's share of them.

    `local` is the training process's open source (used when no worker runs); workers open
    their own with `open_source` (a picklable callable, e.g. a `functools.partial`)."""

    def __init__(self, open_source: Callable[[], Any], start: int, local: Any = None):
        super().__init__()
        self.open_source = open_source
        self.start = start
        self.local = local

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        if info is None:
            source = self.local if self.local is not None else self.open_source()
            indices = itertools.count(self.start)
            for item in source.items(indices):
                yield item_tensors(item)
            return
        source = None
        try:
            source = self.open_source()
            indices = itertools.count(self.start + info.id, info.num_workers)
            for item in source.items(indices):
                yield item_tensors(item)
        except Exception as error:  # sent on as an item: DataLoader would bury it in a traceback
            yield WorkerFailure(_portable(error))
        finally:
            if source is not None:
                close_source(source)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["local"] = None  # files, threads and decoding processes stay in their process
        return state


TRAINER_POLL_S = 0.5


def _trainer_gone(pid: int) -> bool:
    """Whether process `pid` ended (a zombie waiting for its parent counts as ended)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as handle:  # Linux; elsewhere the kill test alone
            stat = handle.read()
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _watch_trainer(pid: int) -> None:
    while not _trainer_gone(pid):
        time.sleep(TRAINER_POLL_S)
    os._exit(0)


def exit_with_trainer(trainer: int, _worker_id: int) -> None:
    """A loader worker's init: end when the training process `trainer` ends, however it ends.
    DataLoader's own check compares the worker's parent, here the forkserver, which lives as
    long as its children do: after kill -9 of train the workers, the forkserver and the
    resource tracker would otherwise stay forever (issue 25's signal sweep)."""
    threading.Thread(
        target=_watch_trainer, args=(trainer,), name="trainer-watch", daemon=True
    ).start()


def make_loader(
    dataset: StreamDataset, config: FeedConfig, device: torch.device, workers: int
) -> DataLoader:
    """The DataLoader of a feed: one item per step, pinned only for a CUDA device (by the
    DataLoader with workers, else by `device_prefetch`), its own
    generator (a DataLoader otherwise draws its base seed from torch's global RNG, which would
    change the training trajectory)."""
    return DataLoader(
        dataset,
        batch_size=None,
        collate_fn=_as_is,
        num_workers=workers,
        # Workers' items are pinned by the DataLoader's pin thread; the training process's own
        # (workers=0) by `device_prefetch`'s thread, which leaves GPU-decoded ones as they are.
        pin_memory=wants_pinned_memory(device) and workers > 0,
        prefetch_factor=config.prefetch if workers > 0 else None,
        multiprocessing_context=worker_context() if workers > 0 else None,
        generator=torch.Generator(),
        persistent_workers=False,
        worker_init_fn=functools.partial(exit_with_trainer, os.getpid()) if workers > 0 else None,
    )


def feed_workers(config: FeedConfig, source: Any) -> int:
    """Worker processes for `source`: at most one for sources read front to back."""
    if not getattr(source, "random_access", True):
        return min(config.loader_workers, 1)
    return config.loader_workers


def feed(
    source: Any,
    open_source: Callable[[], Any],
    start: int,
    config: FeedConfig,
    device: torch.device,
) -> Iterator[Any]:
    """Items start, start+1, ... of `source` as tensors (see the module docstring); on CUDA
    their images arrive on the device already (`device_prefetch`: uint8, copied on a side
    stream while the previous step computes)."""
    yield from prefetch_to_device(_loader_items(source, open_source, start, config, device), device)


def _loader_items(
    source: Any,
    open_source: Callable[[], Any],
    start: int,
    config: FeedConfig,
    device: torch.device,
) -> Iterator[Any]:
    """The DataLoader's items, host tensors (pinned on CUDA)."""
    workers = feed_workers(config, source)
    loader = make_loader(StreamDataset(open_source, start, source), config, device, workers)
    iterator = iter(loader)
    try:
        for item in iterator:
            if isinstance(item, WorkerFailure):
                raise item.error
            yield tuple(item) if isinstance(item, list) else item  # pinning lists tuples
    finally:
        # Stop and join the workers now (Ctrl-C, an error, or the end of the run), not
        # whenever the iterator happens to be collected.
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        del iterator


def check_throughput_options(
    loader_workers: int, decode_processes: int, keep_snapshots: int | None, dataset: str
) -> None:
    """Refuse impossible loading options with one message, before any work starts."""
    if loader_workers < 0 or decode_processes < 0:
        raise LearnerConfigError(
            f"--loader-workers {loader_workers} --decode-processes {decode_processes}: "
            "expected >= 0"
        )
    if keep_snapshots is not None and keep_snapshots < 0:
        raise LearnerConfigError(f"--keep-snapshots {keep_snapshots}: expected >= 0")
    if decode_processes > 0 and loader_workers > 0:
        raise LearnerConfigError(
            "--decode-processes applies when the training process reads (--loader-workers 0); "
            "loader workers decode themselves: use one of the two"
        )
    if decode_processes > 0 and dataset == SYNTHETIC:
        raise LearnerConfigError(
            "--decode-processes decodes JPEG records; --dataset synthetic has none"
        )


def check_decode_device(
    decode_device: str,
    device: torch.device,
    loader_workers: int | None,
    decode_processes: int | None,
    dataset: str,
) -> None:
    """Refuse `--decode-device cuda` where it cannot run, in one line before any work: GPU
    decoding runs in the training process (a DataLoader worker must not touch CUDA, and the
    reader's decode processes decode on the CPU), onto the training GPU, and needs CUDA with a
    torchvision that loads (`episodes.images.gpu_decode.gpu_decode_problem`)."""
    if decode_device not in DECODE_DEVICES:
        raise LearnerConfigError(
            f"--decode-device {decode_device!r}: expected one of {DECODE_DEVICES}"
        )
    if decode_device == "cpu":
        return
    if dataset == SYNTHETIC:
        raise LearnerConfigError("--decode-device cuda decodes JPEG records; --synthetic has none")
    if loader_workers or decode_processes:
        raise LearnerConfigError(
            f"--decode-device cuda decodes in the training process: drop --loader-workers "
            f"{loader_workers or 0} --decode-processes {decode_processes or 0} (or decode on "
            "the CPU, --decode-device cpu)"
        )
    from episodes.images.gpu_decode import gpu_decode_problem

    why_not = gpu_decode_problem("cuda")
    if why_not is not None:
        raise LearnerConfigError(f"--decode-device cuda: {why_not}; use --decode-device cpu")
    if device.type != "cuda":
        raise LearnerConfigError(
            f"--decode-device cuda decodes onto the training GPU; --device {device} trains on "
            "the CPU (use --device cuda, or --decode-device cpu)"
        )
