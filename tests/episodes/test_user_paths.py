"""User paths of the reader: every option gives the same episodes, the reference resize matches
TensorFlow's, the decode-process default and its fallbacks, a cut records file, `--stats` over
millions of episodes, and a decoded cache that no longer matches its manifest."""

from __future__ import annotations

import subprocess
import sys
import warnings
import weakref

import numpy as np
import pytest

from episodes.images.decoded_cache import DecodedCacheError, cache_path, write_decoded_cache
from episodes.images.image_decode import decode_image, usable_cores
from episodes.read import main as read_main
from episodes.reading.decode_processes import ReaderNote, auto_decode_processes
from episodes.reading.reader import EpisodeReader
from episodes.records.dataset_spec import Split
from episodes.sampling.episode import EpisodeDescription
from episodes.sampling.episode_stats import IntegerSummary, episode_statistics, summarize
from episodes.sampling.sampler import SamplerConfig
from episodes.util.cli_errors import run_main
from tests.fixtures.paths import REPO
from tests.fixtures.reader_datasets import encode, write_dataset


def photo(class_id: int, record: int, fmt: str = "JPEG") -> bytes:
    """A textured picture of a size that varies by record (24..90 px a side): resizing,
    DCT reduction (sides >= 48 for 24 px) and chroma subsampling all take part."""
    rng = np.random.default_rng(class_id * 100 + record)
    height, width = 24 + (record * 7) % 67, 24 + (record * 13 + class_id) % 67
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    waves = np.sin(x / (2 + class_id) + y / 5)[..., None] * np.array([90, -60, 40])
    array = 128 + waves + rng.normal(0, 15, (height, width, 3))
    return encode(np.clip(array, 0, 255).astype(np.uint8), fmt)


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    return write_dataset(
        tmp_path_factory.mktemp("photos") / "photos", per_class=(14,) * 6, image=photo
    )


# ------------------------------------------------------------------ options, byte for byte


@pytest.mark.slow
@pytest.mark.parametrize("resize", ["reference", "antialias"])
def test_every_reader_option_gives_the_same_episodes_byte_for_byte(photos, tmp_path, resize):
    config = SamplerConfig(min_ways=2, max_ways=2)
    common = dict(image_size=24, resize=resize, decoded_cache="never")
    options = {
        "inline": dict(num_threads=0, decode_processes=0),
        "threads": dict(num_threads=2, decode_processes=0),
        "one process": dict(decode_processes=1),
        "two processes": dict(decode_processes=2),
        "default": {},
        "sampler process": dict(sampler_process=True),
    }
    streams = {}
    for name, extra in options.items():
        with EpisodeReader(photos.root, "test", config, 7, **common, **extra) as reader:
            streams[name] = [e.to_dict() for e in reader.episodes(0, 5)]
    write_decoded_cache(photos, 24, cache_root=tmp_path, resize=resize)
    with EpisodeReader(
        photos.root,
        "test",
        config,
        7,
        image_size=24,
        resize=resize,
        decoded_cache="always",
        cache_root=tmp_path,
    ) as reader:
        streams["decoded cache"] = [e.to_dict() for e in reader.episodes(0, 5)]
    expected = streams.pop("inline")
    for name, episodes in streams.items():
        for a, b in zip(expected, episodes):
            for key in ("support_images", "query_images", "support_labels", "query_class_ids"):
                assert a[key].dtype == b[key].dtype and a[key].tobytes() == b[key].tobytes(), (
                    name,
                    key,
                )


def test_a_cache_made_with_the_other_resize_is_not_used(photos, tmp_path):
    write_decoded_cache(photos, 24, cache_root=tmp_path, resize="antialias")
    with pytest.raises(DecodedCacheError, match="resize='antialias'.*resize='reference'"):
        EpisodeReader(
            photos.root, "test", image_size=24, decoded_cache="always", cache_root=tmp_path
        )


# ------------------------------------------------------------------ resize="reference"


def _tensorflow_reference(data: bytes, size: int) -> np.ndarray:
    """Meta-Dataset's decoder.py: decode_image(channels=3), then resize_images(BILINEAR,
    align_corners=True) in float (the reference then scales it to [-1, 1])."""
    import tensorflow as tf

    image = tf.image.decode_image(data, channels=3)
    image.set_shape([None, None, 3])
    resized = tf.compat.v1.image.resize_images(
        image, [size, size], method=tf.image.ResizeMethod.BILINEAR, align_corners=True
    )
    return tf.cast(resized, tf.float32).numpy()


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_reference_resize_matches_tensorflow(fmt):
    big_shrinks = []
    for record in range(12):
        data = photo(3, record, fmt)
        expected = _tensorflow_reference(data, 28)
        ours = decode_image(data, 28, "reference").astype(np.float32)
        difference = np.abs(ours - expected)
        assert difference.mean() <= 1.0 and difference.max() <= 0.5 + 1e-4  # rounding only
        antialias = decode_image(data, 28, "antialias").astype(np.float32)
        big_shrinks.append(np.abs(antialias - expected).mean())
    assert max(big_shrinks) > 2.0  # the other mode really is another resize


def test_reader_reference_episodes_match_tensorflow_per_record(photos):
    with EpisodeReader(
        photos.root, "test", SamplerConfig(min_ways=2, max_ways=2), 1, image_size=24
    ) as reader:  # the default resize
        description = reader.describe(0)
        episode = reader.read(description)
        support, _ = reader.encoded_images(description)
    for data, ours in zip(support, episode.support_images):
        difference = np.abs(ours.astype(np.float32) - _tensorflow_reference(data, 24))
        assert difference.mean() <= 1.0 and difference.max() <= 0.5 + 1e-4  # 1/255 in [0, 1]


# ------------------------------------------------------------------ decode processes by default


def test_default_reader_decodes_in_one_process_per_core(photos):
    with EpisodeReader(
        photos.root, "test", SamplerConfig(min_ways=2, max_ways=2), 0, image_size=24
    ) as reader:
        reader.episode(0)
        cores = usable_cores()
        expected = 0 if cores < 2 else min(cores, 8)
        assert reader.decode_processes == expected
        if expected:
            assert len(reader._process_pool._processes) == expected


def test_too_little_shared_memory_falls_back_inline_with_one_line(tmp_path):
    if usable_cores() < 2:
        pytest.skip("one core: inline without a note")
    with pytest.warns(ReaderNote) as notes:
        assert auto_decode_processes(1 << 50, prefetch=2) == 0
    (note,) = notes
    text = str(note.message)
    assert "\n" not in text and "/dev/shm" in text and "--shm-size" in text


class _ReaderInWorker:
    """A dataset whose item builds a default reader inside a DataLoader worker."""

    def __init__(self, root):
        self.root = root

    def __len__(self):
        return 1

    def __getitem__(self, index):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reader = EpisodeReader(
                self.root, "test", SamplerConfig(min_ways=2, max_ways=2), 0, image_size=24
            )
            episode = reader.episode(0)
            reader.close()
        notes = [str(w.message) for w in caught if issubclass(w.category, ReaderNote)]
        return reader.decode_processes, notes, int(episode.support_images.sum())


def test_a_reader_built_inside_a_dataloader_worker_decodes_inline_with_one_note(photos):
    from torch.utils.data import DataLoader

    loader = DataLoader(_ReaderInWorker(photos.root), batch_size=None, num_workers=1)
    processes, notes, _ = next(iter(loader))
    assert processes == 0
    if usable_cores() >= 2:
        assert len(notes) == 1 and "DataLoader worker" in notes[0]


# ------------------------------------------------------------------ a cut records file


@pytest.fixture
def cut_dataset(tmp_path):
    spec = write_dataset(tmp_path / "cut", per_class=(20,) * 9, fmt="JPEG")
    path = spec.root / "7.tfrecords"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 + 7])  # ends inside a record
    return spec


ARGS = [
    "--split",
    "test",
    "--episodes",
    "8",
    "--min-ways",
    "2",
    "--max-ways",
    "3",
    "--decode-processes",
    "0",
]


@pytest.mark.parametrize("index", ["stale index", "no index"])
def test_a_cut_records_file_ends_in_one_line_naming_file_class_and_record(
    cut_dataset, capsys, index
):
    if index == "no index":
        (cut_dataset.root / "7.index").unlink()
    code = run_main(read_main, ["--dataset", str(cut_dataset.root), *ARGS])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert str(cut_dataset.root / "7.tfrecords") in err and "class 7" in err
    assert "record 10" in err and ("cut short" in err or "truncated" in err)


def test_a_cut_records_file_from_the_command_line_prints_no_traceback(cut_dataset):
    (cut_dataset.root / "7.index").unlink()
    done = subprocess.run(
        [sys.executable, "-m", "episodes.read", "--dataset", str(cut_dataset.root), *ARGS],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: file ")


# ------------------------------------------------------------------ --stats in constant memory


def test_running_summary_equals_the_batch_computation():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 1000):
        values = rng.integers(1, 60, size=n).tolist()
        running = IntegerSummary()
        for v in values[: n // 2]:
            running.add(v)
        running.update(values[n // 2 :])
        streamed, batch = running.summary(), summarize(values)
        assert streamed.keys() == batch.keys()
        for key in ("count", "mean", "min", "max"):
            assert streamed[key] == batch[key], key
        for key in batch:
            assert streamed[key] == pytest.approx(batch[key], abs=1e-9), key
    assert IntegerSummary().summary() == {"count": 0}


def _tracked(count: int, alive: weakref.WeakSet, peak: list[int]):
    """`count` descriptions, each watched while it lives; peak[0] is the most alive at once."""
    for i in range(count):
        ways = 2 + i % 5
        d = EpisodeDescription(
            "toy",
            Split.TEST,
            i,
            tuple(range(ways)),
            tuple((0,) * (1 + (i + c) % 4) for c in range(ways)),
            tuple((1, 2) for _ in range(ways)),
        )
        alive.add(d)
        peak[0] = max(peak[0], len(alive))
        yield d


def test_statistics_keep_no_description():
    alive, peak = weakref.WeakSet(), [0]
    stats = episode_statistics(_tracked(5000, alive, peak))
    assert stats["episodes"] == 5000 and peak[0] <= 2
    assert stats["ways"]["min"] == 2 and stats["ways"]["max"] == 6


def test_cli_stats_stream_without_keeping_descriptions(monkeypatch, tmp_path, capsys):
    spec = write_dataset(tmp_path / "toy", per_class=(12,) * 9)
    alive, peak = weakref.WeakSet(), [0]
    describe = EpisodeReader.describe

    def watched(self, index):
        d = describe(self, index)
        alive.add(d)
        peak[0] = max(peak[0], len(alive))
        return d

    monkeypatch.setattr(EpisodeReader, "describe", watched)
    code = read_main(
        [
            "--dataset",
            str(spec.root),
            "--split",
            "test",
            "--episodes",
            "0",
            "--stats",
            "3000",
            "--min-ways",
            "2",
            "--max-ways",
            "3",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "statistics of 3000 episodes" in out
    assert peak[0] <= 3  # before: all 3000 held in a list until the end


# ------------------------------------------------------------------ decoded cache checksums


@pytest.fixture
def cached(tmp_path):
    from beam_pipelines import cache as cache_cli

    spec = write_dataset(tmp_path / "toy", per_class=(12,) * 9, fmt="JPEG")
    assert cache_cli.main([str(spec.root), "--image-size", "16"]) == 0
    return spec


def test_cache_manifest_records_sizes_and_checksums_and_verify_checks_them(cached, capsys):
    import json

    from beam_pipelines import verify

    folder = cache_path(cached.root, 16)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert len(manifest["sha256"]) == len(manifest["array_bytes"]) == cached.num_classes
    assert manifest["array_bytes"][3] == (folder / "3.npy").stat().st_size
    assert not list(folder.glob("*.sum"))  # the workers' entries were folded in
    assert verify.main([str(cached.root)]) == 0
    assert "decoded caches: 1 checked" in capsys.readouterr().out
    array = folder / "3.npy"
    data = bytearray(array.read_bytes())
    data[-5] ^= 0xFF  # same size, other pixels
    array.write_bytes(bytes(data))
    assert verify.main([str(cached.root)]) == 1
    assert f"{array}: SHA-256 differs" in capsys.readouterr().out


def test_reader_refuses_a_cache_whose_arrays_do_not_match_the_manifest_at_open(cached):
    array = cache_path(cached.root, 16) / "5.npy"
    array.write_bytes(array.read_bytes()[: -16 * 16 * 3])  # one image short
    with pytest.raises(DecodedCacheError, match=rf"{array}: .* bytes, the manifest says"):
        EpisodeReader(cached.root, "test", image_size=16, decoded_cache="always")
    with pytest.warns(UserWarning, match="ignoring decoded cache"):  # "auto": decode instead
        reader = EpisodeReader(
            cached.root,
            "test",
            SamplerConfig(min_ways=2, max_ways=2),
            image_size=16,
            decode_processes=0,
        )
    with reader:
        assert not reader.uses_decoded_cache and reader.episode(0).ways == 2


def test_a_jpeg_over_the_size_limit_is_refused_by_the_fast_decoder_too():
    """simplejpeg has no pixel limit of its own: the reader applies the toolkit's one limit
    (episodes.images.image_size_limit) to JPEG headers before decoding, as Pillow does for the rest."""
    from episodes.images.image_decode import ImageDecodeError

    jpeg = bytearray(encode(np.zeros((8, 8, 3), np.uint8), "JPEG"))
    sof = jpeg.index(b"\xff\xc0")  # baseline frame header: length, precision, height, width
    jpeg[sof + 5 : sof + 9] = (15_000).to_bytes(2, "big") * 2  # claims 15000x15000
    with pytest.raises(ImageDecodeError, match="225000000 pixels"):
        decode_image(bytes(jpeg), 84)
