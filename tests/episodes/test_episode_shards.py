"""Episode shards: record codec, the Beam job (same bytes with 1 or 2 workers), the sequential
shard reader (same episodes as EpisodeReader), TensorFlow parsing, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from beam_pipelines.episodes import main as shards_main
from beam_pipelines.episodes import write_episode_shards
from episodes.reading.episode_shards import (
    MANIFEST,
    EpisodeShardReader,
    ShardError,
    decode_episode,
    encode_episode,
    shard_file_name,
    shard_files,
)
from episodes.reading.reader import EpisodeReader
from episodes.records.dataset_spec import Split
from episodes.sampling.episode import EpisodeDescription
from episodes.sampling.sampler import SamplerConfig
from tests.fixtures.local_runner import make_local_runner
from tests.fixtures.reader_datasets import write_dataset

CONFIG = SamplerConfig.fixed(ways=3, shots=2, query=2)


@pytest.fixture
def toy(tmp_path):
    return write_dataset(tmp_path / "toy")


def job_args(toy, episodes=9, shards=4, config=CONFIG, seed=5):
    return {
        "dataset_dirs": (str(toy.root),),
        "split": "test",
        "config": config.to_json(),
        "seed": seed,
        "start": 0,
        "num_episodes": episodes,
        "num_shards": shards,
    }


def test_episode_record_round_trip_is_deterministic():
    d = EpisodeDescription("toy", Split.TEST, 42, (7, 3), ((1, 2), (0,)), ((5,), (4, 6)))
    images = [bytes([i]) * (i + 1) for i in range(6)]
    payload = encode_episode(
        d,
        images[:3],
        images[3:],
        seed=9,
        class_names=["seven", "three"],
        sampler_config={"mode": "fixed"},
    )
    assert payload == encode_episode(
        d,
        images[:3],
        images[3:],
        seed=9,
        class_names=["seven", "three"],
        sampler_config={"mode": "fixed"},
    )
    record = decode_episode(payload)
    assert (record.dataset, record.split, record.episode_index, record.seed) == (
        "toy",
        "test",
        42,
        9,
    )
    assert record.class_ids == (7, 3) and record.class_names == ("seven", "three")
    assert record.support_images == images[:3] and record.query_images == images[3:]
    assert record.support_labels.tolist() == [0, 0, 1]
    assert record.query_class_ids.tolist() == [7, 3, 3]
    assert record.support_records.tolist() == [1, 2, 0]
    assert record.sampler_config == {"mode": "fixed"}
    with pytest.raises(ValueError, match="support images"):
        encode_episode(d, images[:2], images[3:], seed=9, class_names=["a", "b"])
    with pytest.raises(ShardError, match="missing keys"):
        from episodes.records.example_proto import encode_image_example

        decode_episode(encode_image_example(b"x", 1))


@pytest.mark.slow
def test_beam_job_gives_identical_bytes_with_one_or_two_workers(toy, tmp_path):
    one = write_episode_shards(job_args(toy), tmp_path / "one", make_local_runner(1))
    two = write_episode_shards(job_args(toy), tmp_path / "two", make_local_runner(2))
    assert one == two
    files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert files == sorted([shard_file_name(s, 4) for s in range(4)] + ["episodes.json"])
    for name in files:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    manifest = json.loads((tmp_path / "one" / "episodes.json").read_text())
    assert manifest["episodes_per_file"] == [3, 2, 2, 2] and manifest["seed"] == 5
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_shard_reader_yields_the_readers_episodes_in_order(toy, tmp_path):
    write_episode_shards(
        job_args(toy, episodes=7, shards=3), tmp_path / "shards", make_local_runner(1)
    )
    reader = EpisodeReader(toy.root, "test", CONFIG, seed=5, image_size=16)
    shards = EpisodeShardReader(tmp_path / "shards", image_size=16)
    episodes = list(shards)
    assert [e.episode_index for e in episodes] == list(range(7))
    for got, expected in zip(episodes, reader.episodes(0, 7)):
        np.testing.assert_array_equal(got.support_images, expected.support_images)
        np.testing.assert_array_equal(got.query_images, expected.query_images)
        np.testing.assert_array_equal(got.support_labels, expected.support_labels)
        np.testing.assert_array_equal(got.query_class_ids, expected.query_class_ids)
        assert got.class_names == expected.class_names and got.source == "toy"
    by_file = [
        r.episode_index for r in EpisodeShardReader(tmp_path / "shards", order="file").encoded()
    ]
    assert by_file == [0, 3, 6, 1, 4, 2, 5]


def test_shards_parse_with_tensorflow_alone(toy, tmp_path):
    tf = pytest.importorskip("tensorflow")
    write_episode_shards(
        job_args(toy, episodes=3, shards=1), tmp_path / "shards", make_local_runner(1)
    )
    features = {
        "support_images": tf.io.VarLenFeature(tf.string),
        "support_labels": tf.io.VarLenFeature(tf.int64),
        "query_class_ids": tf.io.VarLenFeature(tf.int64),
        "dataset": tf.io.FixedLenFeature([], tf.string),
        "episode_index": tf.io.FixedLenFeature([], tf.int64),
    }
    files = [str(f) for f in shard_files(tmp_path / "shards")]
    parsed = [tf.io.parse_single_example(r, features) for r in tf.data.TFRecordDataset(files)]
    assert [int(p["episode_index"]) for p in parsed] == [0, 1, 2]
    first = parsed[0]
    assert first["dataset"].numpy() == b"toy"
    assert first["support_images"].values.shape[0] == 6
    assert tf.io.decode_png(first["support_images"].values[0]).shape[-1] == 3
    assert sorted(set(first["support_labels"].values.numpy().tolist())) == [0, 1, 2]


def test_cli_refuses_bad_input_before_the_pipeline(toy, tmp_path, capsys):
    out = tmp_path / "shards"
    base = ["--dataset", str(toy.root), "--episodes", "4", "--output", str(out)]
    assert shards_main(base + ["--split", "sideways"]) == 2
    assert "unknown split 'sideways'" in capsys.readouterr().err
    assert (
        shards_main(
            base
            + ["--split", "test", "--mode", "fixed", "--ways", "7", "--shots", "1", "--query", "1"]
        )
        == 2
    )
    assert "ways=7" in capsys.readouterr().err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert (
        shards_main(
            base
            + [
                "--split",
                "test",
                "--mode",
                "fixed",
                "--ways",
                "2",
                "--shots",
                "1",
                "--query",
                "1",
                "--num-shards",
                "2",
            ]
        )
        == 0
    )
    assert "wrote 4 episodes" in capsys.readouterr().out
    assert len(shard_files(out)) == 2
    assert shards_main(base + ["--split", "test"]) == 2  # exists, no --overwrite
    assert "--overwrite" in capsys.readouterr().err


def test_corrupt_shard_is_reported_with_its_file(toy, tmp_path):
    write_episode_shards(
        job_args(toy, episodes=2, shards=1), tmp_path / "shards", make_local_runner(1)
    )
    path = shard_files(tmp_path / "shards")[0]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ShardError, match=str(path)):
        list(EpisodeShardReader(tmp_path / "shards"))
    with pytest.raises(ShardError, match="no such"):
        EpisodeShardReader(tmp_path / "missing")


def test_default_shard_count_follows_the_episodes_size():
    from beam_pipelines.episodes import MAX_DEFAULT_SHARDS, TARGET_SHARD_BYTES, default_num_shards

    mib = 1 << 20
    assert default_num_shards(600, 2 * mib) == 10  # 1,200 MiB in shards of 128 MiB
    assert default_num_shards(600, 1000) == 1  # a small test set: one file
    assert default_num_shards(100_000, 2 * mib) == 1563  # beyond the old cap of 16
    assert default_num_shards(10**7, 2 * mib) == MAX_DEFAULT_SHARDS
    assert default_num_shards(5, 4 * TARGET_SHARD_BYTES) == 5  # at most one per episode
    assert default_num_shards(1, 0) == 1


def test_default_shard_count_is_measured_from_the_first_episodes(toy, tmp_path, monkeypatch):
    """Without --num-shards: the count comes from the mean encoded size of the first episodes
    (here made 40 MiB-per-shard targets so a tiny dataset gives several shards)."""
    import beam_pipelines.episodes as shards_module

    args = job_args(toy, episodes=30, shards=None)
    with EpisodeReader([str(toy.root)], "test", CONFIG, seed=5, decode_processes=0) as reader:
        sizes = []
        for i in range(shards_module.SIZE_SAMPLE_EPISODES):
            support, query = reader.encoded_images(reader.describe(i))
            sizes.append(sum(map(len, support + query)))
    target = int(sum(sizes) / len(sizes) * 30 / 7)  # 30 episodes of the mean size: 7+ shards
    monkeypatch.setattr(shards_module, "TARGET_SHARD_BYTES", target)
    manifest = write_episode_shards(args, tmp_path / "out", make_local_runner(1))
    expected = shards_module.default_num_shards(30, sum(sizes) / len(sizes))
    assert manifest["num_shards"] == expected and 7 <= expected <= 8
    assert sum(manifest["episodes_per_file"]) == 30 and len(manifest["files"]) == expected


def test_a_shards_folder_given_as_a_dataset_is_named_as_shards(tmp_path):
    """Issue 30: a finished shards folder is not 'an incomplete dataset'."""
    from episodes.records.dataset_spec import SpecError
    from episodes.records.local_dataset import require_local_dataset

    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "shard_00000.tfrecords").write_bytes(b"")
    (shards / MANIFEST).write_text("{}")
    with pytest.raises(
        SpecError, match="episode shards .*not a converted dataset.*--episode-shards"
    ):
        require_local_dataset(shards)
    (shards / MANIFEST).unlink()
    with pytest.raises(SpecError, match="incomplete dataset"):
        require_local_dataset(shards)
