"""tf.data adapter: `tf.data.Dataset.range(start, start + count)` mapped to episodes.

Each element is a dict with the reader's fields (images uint8 or float32 (n, S, S, 3), labels
and class ids int64, source and split strings, episode index int64). The map runs the same
EpisodeReader (same descriptions, same decoder) through `tf.numpy_function`, so the arrays equal
the numpy reader's; `num_parallel_calls` episodes are read concurrently, in order.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from episodes.reading.reader import EpisodeReader

__all__ = ["make_tf_dataset"]

_INT_FIELDS = ("support_labels", "support_class_ids", "query_labels", "query_class_ids")


def make_tf_dataset(
    dataset_dirs: str | os.PathLike | Sequence[str | os.PathLike],
    split: Any,
    config: Any = None,
    seed: int = 0,
    *,
    num_episodes: int | None = None,
    start: int = 0,
    num_parallel_calls: int = 2,
    reader: EpisodeReader | None = None,
    **reader_options: Any,
) -> tf.data.Dataset:
    """Episodes start.. (without end when `num_episodes` is None) as a tf.data.Dataset."""
    if reader is None:
        reader = EpisodeReader(dataset_dirs, split, config, seed, **reader_options)
    size = reader.image_size
    image_dtype = tf.as_dtype(reader.dtype)
    indices = (
        tf.data.Dataset.range(start, start + num_episodes)
        if num_episodes is not None
        else tf.data.Dataset.range(start, np.iinfo(np.int64).max)
    )

    def read(index: np.int64):
        episode = reader.episode(int(index))
        return (
            episode.support_images,
            episode.support_labels,
            episode.support_class_ids,
            episode.query_images,
            episode.query_labels,
            episode.query_class_ids,
            np.bytes_(episode.source),
            np.bytes_(episode.split),
        )

    def as_dict(index):
        out_types = [
            image_dtype,
            tf.int64,
            tf.int64,
            image_dtype,
            tf.int64,
            tf.int64,
            tf.string,
            tf.string,
        ]
        values = tf.numpy_function(read, [index], out_types, stateful=False)
        s_img, s_lab, s_ids, q_img, q_lab, q_ids, source, split_name = values
        for images in (s_img, q_img):
            images.set_shape([None, size, size, 3])
        for labels in (s_lab, s_ids, q_lab, q_ids):
            labels.set_shape([None])
        source.set_shape([])
        split_name.set_shape([])
        return {
            "support_images": s_img,
            "support_labels": s_lab,
            "support_class_ids": s_ids,
            "query_images": q_img,
            "query_labels": q_lab,
            "query_class_ids": q_ids,
            "source": source,
            "split": split_name,
            "episode_index": index,
        }

    return indices.map(as_dict, num_parallel_calls=num_parallel_calls, deterministic=True)
