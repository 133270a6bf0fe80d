"""Episode shards: one `tf.train.Example` per episode in TFRecord files, and a sequential reader.

Record keys (any TensorFlow user can parse them with tf.io.parse_single_example):
  support_images, query_images    bytes list   encoded images, exactly as stored in the dataset
  support_labels, query_labels    int64 list   0..N-1, position of the class in `class_ids`
  support_class_ids, query_class_ids int64 list  absolute class ids of the dataset
  support_records, query_records  int64 list   record number inside the class's TFRecord file
  class_ids                       int64 list   the episode's classes, label order
  class_names                     bytes list   their names, label order
  dataset, split                  bytes        source dataset name, split name
  episode_index, seed, ways       int64
  sampler_config                  bytes        JSON of the SamplerConfig (sorted keys)
Episode i lives in shard i % num_shards, episodes in increasing index inside a shard; files are
`episodes-SSSSS-of-NNNNN.tfrecords` beside a manifest `episodes.json`.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from episodes.images.image_decode import (
    ImageDecodeError,
    decode_image_into,
    scale_images,
    submit_chunks,
    wait_all,
)
from episodes.records.example_proto import ExampleDecodeError, decode_example, encode_example
from episodes.records.local_dataset import SHARDS_MANIFEST
from episodes.records.tfrecord_io import CorruptRecordError, iter_record_offsets
from episodes.sampling.episode import Episode, EpisodeDescription, episode_labels
from episodes.util.cli_errors import UserError

__all__ = [
    "EncodedEpisode",
    "EpisodeShardReader",
    "MANIFEST",
    "SHARDS_FORMAT",
    "ShardError",
    "decode_episode",
    "encode_episode",
    "shard_episode_count",
    "shard_file_name",
    "shard_files",
    "shard_indices",
]

SHARDS_FORMAT = "fewshot-tasksets.episode_shards/1"
MANIFEST = SHARDS_MANIFEST  # a shards folder's mark: the reader tells it from a dataset
_READ_BUFFER = 4 << 20


class ShardError(UserError, ValueError):
    """An episode shard that is missing, corrupt or not an episode record."""


def shard_file_name(shard: int, num_shards: int) -> str:
    return f"episodes-{shard:05d}-of-{num_shards:05d}.tfrecords"


def shard_indices(shard: int, num_shards: int, start: int, count: int) -> range:
    """Episode indices stored in `shard`: start + j for j in 0..count-1 with j % num_shards."""
    return range(start + shard, start + count, num_shards)


@dataclass(frozen=True, eq=False)
class EncodedEpisode:
    """One shard record, images still encoded."""

    dataset: str
    split: str
    episode_index: int
    seed: int
    class_ids: tuple[int, ...]
    class_names: tuple[str, ...]
    support_images: list[bytes]
    support_labels: np.ndarray
    support_class_ids: np.ndarray
    support_records: np.ndarray
    query_images: list[bytes]
    query_labels: np.ndarray
    query_class_ids: np.ndarray
    query_records: np.ndarray
    sampler_config: dict

    @property
    def ways(self) -> int:
        return len(self.class_ids)


def encode_episode(
    description: EpisodeDescription,
    support_images: Sequence[bytes],
    query_images: Sequence[bytes],
    *,
    seed: int,
    class_names: Sequence[str],
    sampler_config: dict | None = None,
) -> bytes:
    """Serialise one episode (deterministic bytes: sorted keys, fixed field encodings)."""
    if len(support_images) != description.support_size:
        raise ValueError(f"{len(support_images)} support images for {description.support_size}")
    if len(query_images) != description.query_size:
        raise ValueError(f"{len(query_images)} query images for {description.query_size}")
    s_labels, s_ids, q_labels, q_ids = episode_labels(description)
    features = {
        "support_images": [bytes(b) for b in support_images],
        "support_labels": s_labels.tolist(),
        "support_class_ids": s_ids.tolist(),
        "support_records": [k for group in description.support for k in group],
        "query_images": [bytes(b) for b in query_images],
        "query_labels": q_labels.tolist(),
        "query_class_ids": q_ids.tolist(),
        "query_records": [k for group in description.query for k in group],
        "class_ids": list(description.class_ids),
        "class_names": [str(n).encode("utf-8") for n in class_names],
        "dataset": description.source.encode("utf-8"),
        "split": description.split.value.encode("utf-8"),
        "episode_index": [description.episode_index],
        "seed": [int(seed)],
        "ways": [description.ways],
        "sampler_config": json.dumps(sampler_config or {}, sort_keys=True).encode("utf-8"),
    }
    return encode_example(features)


def decode_episode(payload: bytes, where: str = "episode record") -> EncodedEpisode:
    """Parse one shard record; a clear error when keys are missing or inconsistent."""
    try:
        f = decode_example(payload)
    except ExampleDecodeError as exc:
        raise ShardError(f"{where}: not a tf.train.Example ({exc})") from exc
    required = (
        "support_images",
        "query_images",
        "support_labels",
        "query_labels",
        "class_ids",
        "dataset",
        "split",
        "episode_index",
        "seed",
    )
    missing = [k for k in required if k not in f]
    if missing:
        raise ShardError(f"{where}: not an episode record (missing keys {missing})")

    def ints(key: str) -> np.ndarray:
        return np.asarray(f.get(key, []), dtype=np.int64)

    class_ids = tuple(int(c) for c in f["class_ids"])
    s_labels, q_labels = ints("support_labels"), ints("query_labels")
    if len(s_labels) != len(f["support_images"]) or len(q_labels) != len(f["query_images"]):
        raise ShardError(f"{where}: image and label counts differ")
    names = [b.decode("utf-8") for b in f.get("class_names", [])] or [str(c) for c in class_ids]
    config = f.get("sampler_config", [b"{}"])
    return EncodedEpisode(
        dataset=f["dataset"][0].decode("utf-8"),
        split=f["split"][0].decode("utf-8"),
        episode_index=int(f["episode_index"][0]),
        seed=int(f["seed"][0]),
        class_ids=class_ids,
        class_names=tuple(names),
        support_images=list(f["support_images"]),
        support_labels=s_labels,
        support_class_ids=ints("support_class_ids"),
        support_records=ints("support_records"),
        query_images=list(f["query_images"]),
        query_labels=q_labels,
        query_class_ids=ints("query_class_ids"),
        query_records=ints("query_records"),
        sampler_config=json.loads(config[0].decode("utf-8")) if config else {},
    )


def shard_files(path: str | os.PathLike) -> list[Path]:
    """The shard files of a shards folder (from its manifest, else by name), or one file."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ShardError(f"{path}: no such episode shard file or folder")
    manifest = path / MANIFEST
    if manifest.exists():
        try:
            files = [path / name for name in json.loads(manifest.read_text())["files"]]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ShardError(f"{manifest}: malformed shards manifest ({exc})") from exc
    else:
        files = sorted(path.glob("episodes-*-of-*.tfrecords"))
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise ShardError(f"{missing[0]}: episode shard listed in {path} is missing")
    if not files:
        raise ShardError(f"{path}: no episode shards (episodes-*-of-*.tfrecords)")
    return files


def shard_episode_count(path: str | os.PathLike) -> int:
    """How many episodes shards hold: the manifest's count, else their records counted."""
    path = Path(path)
    manifest = path / MANIFEST
    if path.is_dir() and manifest.is_file():
        try:
            return int(json.loads(manifest.read_text())["episodes"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            pass  # counted below; shard_files names a malformed manifest
    count = 0
    for file in shard_files(path):
        with open(file, "rb", buffering=_READ_BUFFER) as stream:
            try:
                count += sum(1 for _ in iter_record_offsets(stream, where=str(file)))
            except CorruptRecordError as exc:
                raise ShardError(f"corrupt episode shard: {exc}") from exc
    return count


def _iter_file(path: Path) -> Iterator[EncodedEpisode]:
    with open(path, "rb", buffering=_READ_BUFFER) as stream:
        try:
            for number, (_, payload) in enumerate(iter_record_offsets(stream, where=str(path))):
                yield decode_episode(payload, where=f"{path}, record {number}")
        except CorruptRecordError as exc:
            raise ShardError(f"corrupt episode shard: {exc}") from exc


class EpisodeShardReader:
    """Reads episode shards front to back (each file sequentially, large buffered reads).

    order="episode" visits the shards round-robin, which yields episodes in increasing index
    (episode i is record i // S of shard i % S); order="file" reads one file after the other.
    Iterating yields `episodes.sampling.episode.Episode` with images decoded and resized like the reader."""

    def __init__(
        self,
        path: str | os.PathLike,
        image_size: int = 84,
        dtype: str = "uint8",
        float_range: tuple[float, float] = (0.0, 1.0),
        num_threads: int = 2,
        prefetch: int = 2,
        order: str = "episode",
    ):
        if order not in ("episode", "file"):
            raise ShardError(f"order={order!r}: expected 'episode' or 'file'")
        if image_size < 1:
            raise ShardError(f"image_size={image_size}: expected >= 1")
        self.files = shard_files(path)
        self.image_size = image_size
        self.dtype = np.dtype(dtype)
        self.float_range = float_range
        self.num_threads = num_threads
        self.prefetch = prefetch
        self.order = order

    def encoded(self) -> Iterator[EncodedEpisode]:
        """Shard records in the reader's order, images still encoded."""
        if self.order == "file" or len(self.files) == 1:
            for path in self.files:
                yield from _iter_file(path)
            return
        streams = deque(_iter_file(path) for path in self.files)
        while streams:
            stream = streams.popleft()
            record = next(stream, None)
            if record is not None:
                yield record
                streams.append(stream)

    def __iter__(self) -> Iterator[Episode]:
        executor = ThreadPoolExecutor(self.num_threads) if self.num_threads > 0 else None
        pending: deque = deque()
        try:
            for record in self.encoded():
                pending.append(self._start(record, executor))
                if len(pending) > self.prefetch:
                    yield self._finish(*pending.popleft())
            while pending:
                yield self._finish(*pending.popleft())
        finally:
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)

    def _start(self, record: EncodedEpisode, executor):
        encoded = record.support_images + record.query_images
        size = self.image_size
        images = np.empty((len(encoded), size, size, 3), dtype=np.uint8)

        def fill(i: int) -> None:
            try:
                decode_image_into(encoded[i], images[i])
            except ImageDecodeError as exc:
                raise ShardError(
                    f"episode {record.episode_index} of {record.dataset}: image {i}: {exc}"
                ) from None

        return record, images, submit_chunks(fill, len(encoded), executor, self.num_threads)

    def _finish(self, record: EncodedEpisode, images: np.ndarray, futures: Any) -> Episode:
        wait_all(futures)
        images = scale_images(images, self.dtype, self.float_range)
        n = len(record.support_images)
        return Episode(
            support_images=images[:n],
            support_labels=record.support_labels,
            support_class_ids=record.support_class_ids,
            query_images=images[n:],
            query_labels=record.query_labels,
            query_class_ids=record.query_class_ids,
            source=record.dataset,
            split=record.split,
            episode_index=record.episode_index,
            class_names=record.class_names,
        )
