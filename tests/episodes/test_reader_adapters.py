"""torch IterableDataset (2 workers: every episode exactly once, equal to the numpy reader's)
and tf.data adapter (same arrays as the numpy reader)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from episodes.adapters.torch_adapter import EpisodeDataset, episode_loader, worker_indices
from episodes.reading.reader import EpisodeReader
from episodes.records.record_index import index_path_for
from episodes.sampling.sampler import SamplerConfig
from tests.fixtures.reader_datasets import write_dataset

CONFIG = SamplerConfig.fixed(ways=3, shots=2, query=2)


@pytest.fixture
def toy(tmp_path):
    return write_dataset(tmp_path / "toy")


def test_worker_indices_partition_the_episodes():
    for workers in (1, 2, 3):
        parts = [list(worker_indices(5, 11, w, workers)) for w in range(workers)]
        assert sorted(i for part in parts for i in part) == list(range(5, 16))


def test_torch_loader_with_two_workers_yields_each_episode_once(toy):
    torch.set_num_threads(1)
    dataset = EpisodeDataset(
        toy.root, "test", CONFIG, seed=1, num_episodes=7, start=2, image_size=16
    )
    assert len(dataset) == 7
    loader = episode_loader(dataset, num_workers=2, pin_memory=False)
    batches = list(loader)
    indices = [b["episode_index"] for b in batches]
    assert sorted(indices) == list(range(2, 9))  # each exactly once
    assert indices == list(range(2, 9))  # and in order
    reader = EpisodeReader(toy.root, "test", CONFIG, seed=1, image_size=16)
    for batch in batches:
        expected = reader.episode(batch["episode_index"])
        assert batch["support_images"].dtype == torch.uint8
        np.testing.assert_array_equal(batch["support_images"].numpy(), expected.support_images)
        np.testing.assert_array_equal(batch["query_images"].numpy(), expected.query_images)
        np.testing.assert_array_equal(batch["query_labels"].numpy(), expected.query_labels)
        np.testing.assert_array_equal(
            batch["support_class_ids"].numpy(), expected.support_class_ids
        )
        assert batch["source"] == "toy" and batch["class_names"] == list(expected.class_names)


def test_torch_dataset_channels_first_and_float(toy):
    dataset = EpisodeDataset(
        toy.root,
        "test",
        CONFIG,
        seed=0,
        num_episodes=2,
        image_size=8,
        channels_first=True,
        dtype="float32",
    )
    batch = next(iter(episode_loader(dataset)))
    assert batch["support_images"].shape == (6, 3, 8, 8)
    assert batch["support_images"].dtype == torch.float32
    assert 0.0 <= float(batch["support_images"].min()) <= float(batch["support_images"].max()) <= 1
    with pytest.raises(ValueError, match="unknown split"):
        EpisodeDataset(toy.root, "tset", CONFIG, num_episodes=2)


def test_tf_dataset_equals_the_numpy_reader(toy):
    tf = pytest.importorskip("tensorflow")
    from episodes.adapters.tf_adapter import make_tf_dataset

    reader = EpisodeReader(toy.root, "test", CONFIG, seed=2, image_size=12)
    dataset = make_tf_dataset(
        toy.root, "test", CONFIG, seed=2, num_episodes=4, start=1, image_size=12
    )
    assert dataset.element_spec["support_images"].shape.as_list() == [None, 12, 12, 3]
    count = 0
    for element in dataset.as_numpy_iterator():
        expected = reader.episode(int(element["episode_index"]))
        np.testing.assert_array_equal(element["support_images"], expected.support_images)
        np.testing.assert_array_equal(element["query_images"], expected.query_images)
        np.testing.assert_array_equal(element["support_labels"], expected.support_labels)
        np.testing.assert_array_equal(element["query_class_ids"], expected.query_class_ids)
        assert element["source"] == b"toy" and element["split"] == b"test"
        count += 1
    assert count == 4
    assert isinstance(dataset, tf.data.Dataset)


def test_records_written_by_tensorflow_are_read(tmp_path):
    """The reference tool writes records with tf.io.TFRecordWriter and tf.train.Example."""
    tf = pytest.importorskip("tensorflow")
    from episodes.images.record_images import image_of_record
    from tests.fixtures.reader_datasets import colour_of, solid_image

    folder = tmp_path / "tf_written"
    spec = write_dataset(folder, per_class=(5,) * 9)
    for class_id in range(9):
        path = spec.records_path(class_id)
        path.unlink()
        index_path_for(path).unlink()
        with tf.io.TFRecordWriter(str(path)) as writer:
            for k in range(5):
                image = solid_image(class_id, k)
                example = tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            "label": tf.train.Feature(
                                int64_list=tf.train.Int64List(value=[class_id])
                            ),
                            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
                        }
                    )
                )
                payload = example.SerializeToString()
                assert image_of_record(payload) == image
                writer.write(payload)
    reader = EpisodeReader(
        folder, "test", SamplerConfig.fixed(ways=2, shots=2, query=2), image_size=8
    )
    episode = reader.episode(0)
    d = reader.describe(0)
    h = 4
    got = [tuple(int(v) for v in img[h, h]) for img in episode.support_images]
    assert got == [colour_of(c, k) for c, s in zip(d.class_ids, d.support) for k in s]
