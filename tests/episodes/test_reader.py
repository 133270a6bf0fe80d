"""EpisodeReader: the described records become the right pixels and labels, deterministically,
with bounded file handles, from our datasets, reference Meta-Dataset folders and decoded caches;
bad input fails with one clear error."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from episodes.images.decoded_cache import (
    DecodedCache,
    DecodedCacheError,
    cache_path,
    write_decoded_cache,
)
from episodes.images.image_decode import ImageDecodeError, decode_image, decode_images
from episodes.read import main
from episodes.reading.reader import EpisodeReader
from episodes.records.dataset_spec import SpecError, Split
from episodes.records.example_proto import encode_image_example
from episodes.records.reader_errors import ReaderError
from episodes.records.record_index import RecordIndexError, index_path_for
from episodes.records.record_reader import CorruptRecordError
from episodes.records.tfrecord_io import write_records
from episodes.sampling.episode import EpisodeDescription
from episodes.sampling.sampler import SamplerConfig, SamplerError
from episodes.util.cli_errors import UserError
from tests.fixtures.reader_datasets import (
    ListSampler,
    colour_of,
    encode,
    solid_image,
    write_dataset,
)
from tests.fixtures.unwritable_folder import read_only

FIXED = SamplerConfig.fixed(ways=3, shots=2, query=3)


def colours(images: np.ndarray) -> list[tuple[int, ...]]:
    """The colour of each (solid) image, from its centre pixel."""
    h = images.shape[1] // 2
    return [tuple(int(v) for v in img[h, h]) for img in images]


def description(
    source="toy", index=0, class_ids=(6, 7), support=((0, 3), (5,)), query=((1,), (2, 4))
) -> EpisodeDescription:
    return EpisodeDescription(source, Split.TEST, index, class_ids, support, query)


@pytest.fixture
def toy(tmp_path):
    return write_dataset(tmp_path / "toy")


# ---------------------------------------------------------------------------------- decoding


def test_decode_image_gives_square_rgb_of_any_input_mode():
    gray = encode(np.full((10, 30), 77, np.uint8), "PNG")
    rgba = encode(
        np.dstack([np.full((12, 12, 3), 9, np.uint8), np.full((12, 12), 128, np.uint8)]), "PNG"
    )
    wide = solid_image(1, 2, shape=(40, 90), fmt="JPEG")
    for data, colour in ((gray, (77, 77, 77)), (rgba, (9, 9, 9)), (wide, colour_of(1, 2))):
        out = decode_image(data, 16)
        assert out.shape == (16, 16, 3) and out.dtype == np.uint8
        assert np.abs(out.astype(int) - np.array(colour)).max() <= 3
    assert decode_image(wide, None).shape == (40, 90, 3)
    with pytest.raises(ImageDecodeError, match="not a decodable image"):
        decode_image(b"not an image at all", 16)
    with pytest.raises(ImageDecodeError, match="photo 1"):
        decode_images([wide, b"junk"], 8, describe=lambda i: f"photo {i}")


def test_jpeg_draft_reduces_large_images_to_the_same_picture():
    y, x = np.mgrid[0:400, 0:400]
    big = encode(
        np.dstack([x * 255 // 400, y * 255 // 400, np.full_like(x, 90)]).astype(np.uint8), "JPEG"
    )
    small = decode_image(big, 50)
    reference = np.asarray(
        Image.open(__import__("io").BytesIO(big))
        .convert("RGB")
        .resize((50, 50), Image.Resampling.BILINEAR)
    )
    assert small.shape == (50, 50, 3)
    assert np.abs(small.astype(int) - reference.astype(int)).mean() < 3


# ------------------------------------------------------------------------- reading records


@pytest.mark.parametrize(
    "options",
    [
        {"num_threads": 0, "decode_processes": 0},
        {"num_threads": 2, "decode_processes": 0},
        {},  # the default: decode processes where the platform allows
    ],
)
def test_reader_returns_exactly_the_described_records(toy, options):
    d = description()
    with EpisodeReader(
        toy.root, "test", sampler=ListSampler([d]), image_size=16, **options
    ) as reader:
        episode = reader.episode(0)
    assert episode.support_images.shape == (3, 16, 16, 3)
    assert episode.query_images.shape == (3, 16, 16, 3)
    assert colours(episode.support_images) == [colour_of(6, 0), colour_of(6, 3), colour_of(7, 5)]
    assert colours(episode.query_images) == [colour_of(6, 1), colour_of(7, 2), colour_of(7, 4)]
    assert episode.support_labels.tolist() == [0, 0, 1]
    assert episode.query_labels.tolist() == [0, 1, 1]
    assert episode.support_class_ids.tolist() == [6, 6, 7]
    assert episode.query_class_ids.tolist() == [6, 7, 7]
    assert episode.class_names == ("toy_class_06", "toy_class_07")
    assert episode.source == "toy" and episode.split == "test" and episode.ways == 2
    assert episode.shots.tolist() == [2, 1]


def test_float_output_is_the_uint8_output_rescaled(toy):
    d = description()
    as_uint8 = EpisodeReader(toy.root, "test", sampler=ListSampler([d]), image_size=12).episode(0)
    for lo, hi in ((0.0, 1.0), (-1.0, 1.0)):
        reader = EpisodeReader(
            toy.root,
            "test",
            sampler=ListSampler([d]),
            image_size=12,
            dtype="float32",
            float_range=(lo, hi),
        )
        episode = reader.episode(0)
        assert episode.query_images.dtype == np.float32
        expected = lo + as_uint8.query_images.astype(np.float32) * (hi - lo) / 255
        np.testing.assert_allclose(episode.query_images, expected, atol=1e-5)


def test_sampled_episodes_are_deterministic_and_consistent(toy):
    a = EpisodeReader(toy.root, "test", FIXED, seed=3, image_size=8, decode_processes=0)
    b = EpisodeReader(
        toy.root, "test", FIXED, seed=3, image_size=8, num_threads=0, decode_processes=0
    )
    c = EpisodeReader(toy.root, "test", FIXED, seed=4, image_size=8)
    test_classes = set(toy.classes("test"))
    seen_other = False
    for ea, eb, ec in zip(a.episodes(0, 6), b.episodes(0, 6), c.episodes(0, 6)):
        np.testing.assert_array_equal(ea.support_images, eb.support_images)
        np.testing.assert_array_equal(ea.query_images, eb.query_images)
        assert ea.ways == 3 and ea.shots.tolist() == [2, 2, 2]
        assert sorted(set(ea.query_labels.tolist())) == [0, 1, 2]
        assert set(ea.support_class_ids.tolist()) <= test_classes
        d = a.describe(ea.episode_index)
        expected = [colour_of(c, k) for c, s in zip(d.class_ids, d.support) for k in s]
        assert colours(ea.support_images) == expected
        seen_other |= not np.array_equal(ea.support_class_ids, ec.support_class_ids) or not (
            np.array_equal(ea.support_images, ec.support_images)
        )
    assert seen_other, "another seed should give other episodes"


def test_iteration_stops_early_without_hanging_and_respects_num_episodes(toy):
    reader = EpisodeReader(toy.root, "test", FIXED, image_size=8, num_episodes=4)
    assert [e.episode_index for e in reader] == [0, 1, 2, 3]
    for episode in reader.episodes(10, None):
        if episode.episode_index == 12:
            break
    reader.close()


def test_multi_source_episodes_come_from_each_dataset(tmp_path):
    first = write_dataset(tmp_path / "first", name="first")
    second = write_dataset(tmp_path / "second", name="second", per_class=(9,) * 9)
    reader = EpisodeReader([first.root, second.root], "train", FIXED, image_size=8)
    sources = set()
    for episode in reader.episodes(0, 12):
        spec = first if episode.source == "first" else second
        assert set(episode.query_class_ids.tolist()) <= set(spec.classes("train"))
        sources.add(episode.source)
    assert sources == {"first", "second"}


def test_open_files_stay_bounded_whatever_the_class_count(tmp_path):
    spec = write_dataset(
        tmp_path / "many",
        per_class=(6,) * 30,
        splits={Split.TRAIN: list(range(30)), Split.VALID: [], Split.TEST: []},
    )
    reader = EpisodeReader(
        spec.root,
        "train",
        SamplerConfig.fixed(ways=10, shots=1, query=1),
        image_size=8,
        max_open_files=4,
    )
    touched = set()
    for episode in reader.episodes(0, 8):
        touched |= set(episode.support_class_ids.tolist())
        assert reader.open_files <= 4
    assert len(touched) > 4


# ------------------------------------------------------------- reference Meta-Dataset folders


def write_reference_spec(folder: Path, names: list[str], per_class: int) -> None:
    """A spec JSON exactly as the reference Meta-Dataset tool writes it."""
    n = len(names)
    raw = {
        "name": "aircraft_like",
        "classes_per_split": {"TRAIN": n - 4, "VALID": 2, "TEST": 2},
        "images_per_class": {str(c): per_class for c in range(n)},
        "class_names": {str(c): name for c, name in enumerate(names)},
        "path": "/path/to/records/aircraft_like",
        "file_pattern": "{}.tfrecords",
        "__class__": "DatasetSpecification",
    }
    (folder / "dataset_spec.json").write_text(json.dumps(raw))


def test_reference_dataset_without_index_builds_it_beside_the_records(tmp_path):
    folder = tmp_path / "reference"
    write_dataset(folder, per_class=(7,) * 8, with_index=False)
    write_reference_spec(folder, [f"plane {c}" for c in range(8)], 7)
    assert not list(folder.glob("*.index"))
    reader = EpisodeReader(
        folder, "test", SamplerConfig.fixed(ways=2, shots=2, query=2), image_size=8
    )
    episode = reader.episode(0)
    assert set(episode.support_class_ids.tolist()) == {6, 7}
    assert episode.class_names[0].startswith("plane ")
    assert sorted(p.name for p in folder.glob("*.index")) == ["6.index", "7.index"]


def test_read_only_reference_dataset_keeps_its_index_in_the_cache_folder(tmp_path):
    folder = tmp_path / "reference"
    write_dataset(folder, per_class=(7,) * 8, with_index=False)
    write_reference_spec(folder, [f"plane {c}" for c in range(8)], 7)
    cache = tmp_path / "index-cache"
    config = SamplerConfig.fixed(ways=2, shots=3, query=2)
    with read_only(folder):
        reader = EpisodeReader(folder, "test", config, image_size=8, index_cache_dir=cache)
        first = reader.episode(0)
        again = EpisodeReader(folder, "test", config, image_size=8, index_cache_dir=cache)
        np.testing.assert_array_equal(again.episode(0).query_images, first.query_images)
    assert not list(folder.glob("*.index"))
    assert sorted(p.name for p in cache.rglob("*.index")) == ["6.index", "7.index"]


# ------------------------------------------------------------------------- decoded cache


@pytest.mark.parametrize("pool_bytes", [0, 8 << 20])  # copies on the thread pool, or inline
def test_decoded_cache_gives_the_same_arrays_and_detects_other_records(
    tmp_path, monkeypatch, pool_bytes
):
    monkeypatch.setattr("episodes.reading.reader.POOL_GATHER_BYTES", pool_bytes)
    toy = write_dataset(tmp_path / "toy", per_class=(24,) * 9)
    config = SamplerConfig.fixed(ways=3, shots=10, query=12)  # 66 images: 2 gather tasks
    decoded = EpisodeReader(toy.root, "test", config, image_size=12, decoded_cache="never")
    write_decoded_cache(toy, 12)
    manifest = json.loads((cache_path(toy.root, 12) / "manifest.json").read_text())
    assert manifest["images"] == list(toy.images_per_class) and manifest["height"] == 12
    cached = EpisodeReader(toy.root, "test", config, image_size=12, max_open_files=2)
    assert cached.uses_decoded_cache
    for a, b in zip(decoded.episodes(0, 5), cached.episodes(0, 5)):
        np.testing.assert_array_equal(a.support_images, b.support_images)
        np.testing.assert_array_equal(a.query_images, b.query_images)
        np.testing.assert_array_equal(a.query_labels, b.query_labels)
    assert cached._sources["toy"].cache.open_maps <= 2
    # Another size has no cache; "always" says so and how to make one.
    with pytest.raises(DecodedCacheError, match="beam_pipelines.cache"):
        EpisodeReader(toy.root, "test", config, image_size=10, decoded_cache="always")
    # A cache made for other records is refused ("always") or ignored with a warning ("auto").
    spec_file = toy.root / "dataset_spec.json"
    raw = json.loads(spec_file.read_text())
    raw["classes"][0]["name"] = "renamed"
    spec_file.write_text(json.dumps(raw))
    with pytest.raises(DecodedCacheError, match="spec hash differs"):
        EpisodeReader(toy.root, "test", config, image_size=12, decoded_cache="always")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = EpisodeReader(toy.root, "test", config, image_size=12)
    assert not reader.uses_decoded_cache and "ignoring decoded cache" in str(caught[0].message)


def test_decoded_cache_under_a_separate_root_and_bad_rows(toy, tmp_path):
    root = tmp_path / "caches"
    folder = write_decoded_cache(toy, 8, cache_root=root)
    assert folder.parent.parent == root and not cache_path(toy.root, 8).exists()
    reader = EpisodeReader(toy.root, "test", FIXED, image_size=8, cache_root=root)
    assert reader.uses_decoded_cache
    cache = DecodedCache(folder, toy, 8)
    with pytest.raises(DecodedCacheError, match="record 99"):
        cache.gather(0, [1, 99], np.empty((2, 8, 8, 3), np.uint8))


def test_cache_cli_writes_the_cache_with_beam(toy, capsys):
    from beam_pipelines.cache import main as cache_main

    assert cache_main([str(toy.root), "--image-size", "10", "--threads", "1"]) == 0
    assert "wrote" in capsys.readouterr().out
    folder = cache_path(toy.root, 10)
    assert sorted(int(p.stem) for p in folder.glob("*.npy")) == list(range(toy.num_classes))
    arr = np.load(folder / "3.npy")
    assert arr.shape == (12, 10, 10, 3) and colours(arr)[5] == colour_of(3, 5)
    assert cache_main([str(toy.root), "--image-size", "10"]) == 2  # exists, no --overwrite
    assert "exists" in capsys.readouterr().err
    assert not [p for p in toy.root.iterdir() if p.name.startswith(".decoded")]


# ------------------------------------------------------------------------------- bad input


def test_bad_reader_options_fail_before_reading(toy, tmp_path):
    with pytest.raises(SpecError, match="'sideways'"):
        EpisodeReader(toy.root, "sideways", FIXED)
    with pytest.raises(SamplerError, match="ways=5"):
        EpisodeReader(toy.root, "test", SamplerConfig.fixed(ways=5, shots=1, query=1))
    with pytest.raises(SamplerError, match="12"):
        EpisodeReader(toy.root, "test", SamplerConfig.fixed(ways=2, shots=10, query=5))
    with pytest.raises(ReaderError, match="image_size=0"):
        EpisodeReader(toy.root, "test", FIXED, image_size=0)
    for dtype in ("int16", "pixels"):
        with pytest.raises(ReaderError, match=f"dtype='{dtype}'"):
            EpisodeReader(toy.root, "test", FIXED, dtype=dtype)
    with pytest.raises(SpecError, match="no dataset spec"):
        EpisodeReader(tmp_path / "nowhere", "test", FIXED)
    with pytest.raises(SamplerError, match="lambda=1.5"):
        EpisodeReader(toy.root, "test", FIXED, mix_lambda=1.5)
    (toy.root / "7.tfrecords").unlink()
    with pytest.raises(ReaderError, match="7.tfrecords"):
        EpisodeReader(toy.root, "test", FIXED)


def test_corrupt_index_names_the_index_file(toy):
    index = index_path_for(toy.records_path(6))
    index.write_bytes(b"garbage that is no index")
    reader = EpisodeReader(toy.root, "test", sampler=ListSampler([description()]), image_size=8)
    with pytest.raises(RecordIndexError, match=str(index)):
        reader.episode(0)


def test_corrupt_record_names_file_class_and_record(toy):
    path = toy.records_path(7)
    data = bytearray(path.read_bytes())
    offsets = np.frombuffer(index_path_for(path).read_bytes()[24:], dtype="<u8")
    data[int(offsets[5]) + 40] ^= 0xFF  # inside the payload of record 5
    path.write_bytes(bytes(data))
    reader = EpisodeReader(toy.root, "test", sampler=ListSampler([description()]), image_size=8)
    with pytest.raises(CorruptRecordError, match=rf"{path}.*class 7.*record 5"):
        reader.episode(0)


def test_undecodable_image_names_file_class_and_record(toy):
    path = toy.records_path(6)
    payloads = [encode_image_example(solid_image(6, k), 6) for k in range(12)]
    payloads[3] = encode_image_example(b"\x89PNG but truncated", 6)
    write_records(str(path), payloads)
    index_path_for(path).unlink()
    reader = EpisodeReader(toy.root, "test", sampler=ListSampler([description()]), image_size=8)
    with pytest.raises(CorruptRecordError, match=rf"{path}.*class 6.*record 3"):
        reader.episode(0)


def test_record_out_of_range_names_file_and_class(toy):
    d = description(support=((0, 30), (5,)))
    reader = EpisodeReader(toy.root, "test", sampler=ListSampler([d]), image_size=8)
    with pytest.raises(ReaderError, match=r"6.tfrecords, class 6: record 30"):
        reader.episode(0)


# ------------------------------------------------------------------------------------ CLI


def test_cli_prints_a_summary_grid_and_stats(toy, tmp_path, capsys):
    grid = tmp_path / "grid.png"
    code = main(
        [
            "--dataset",
            str(toy.root),
            "--split",
            "test",
            "--mode",
            "fixed",
            "--ways",
            "2",
            "--shots",
            "3",
            "--query",
            "2",
            "--episodes",
            "3",
            "--image-size",
            "16",
            "--save-grid",
            str(grid),
            "--stats",
            "40",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert out.count("ways=2  support=6  query=4") == 3
    assert "toy_class_0" in out and "shots" in out
    assert "statistics of 40 episodes" in out and "ways" in out
    picture = Image.open(grid)
    assert picture.format == "PNG" and picture.width > 100 and picture.height > 100


def test_cli_split_file_overrides_the_spec_splits(toy, tmp_path, capsys):
    split_file = tmp_path / "split.json"
    names = toy.class_names
    split_file.write_text(json.dumps({"train": names[:4], "valid": names[4:5], "test": names[5:8]}))
    main(
        [
            "--dataset",
            str(toy.root),
            "--split",
            "test",
            "--split-file",
            str(split_file),
            "--mode",
            "fixed",
            "--ways",
            "3",
            "--shots",
            "1",
            "--query",
            "1",
            "--episodes",
            "4",
        ]
    )
    out = capsys.readouterr().out
    classes = {
        int(line.split()[1])
        for line in out.splitlines()
        if line.startswith("      ") and line.split()[0].isdigit()
    }
    assert classes == {5, 6, 7}
    split_file.write_text(json.dumps({"train": ["no such class"], "valid": [], "test": []}))
    with pytest.raises(UserError, match="no such class"):
        main(["--dataset", str(toy.root), "--split", "test", "--split-file", str(split_file)])


def test_cli_reports_bad_input_in_one_line(toy):
    with pytest.raises(UserError, match="unknown split 'nope'"):
        main(["--dataset", str(toy.root), "--split", "nope"])
    with pytest.raises(UserError, match="lambda=-0.5 is outside"):
        main(["--dataset", str(toy.root), "--split", "test", "--lambda", "-0.5"])
    shutil.rmtree(toy.root)
    with pytest.raises(UserError, match="no dataset spec"):
        main(["--dataset", str(toy.root), "--split", "test"])


def test_lambda_mixes_base_and_novel_classes(toy):
    reader = EpisodeReader(
        toy.root, "test", FIXED, image_size=8, mix_lambda=0.5, base_split="train"
    )
    train, test = set(toy.classes("train")), set(toy.classes("test"))
    mixed = False
    for episode in reader.episodes(0, 10):
        ids = set(episode.support_class_ids.tolist())
        assert ids <= train | test and len(ids) == 3
        mixed |= bool(ids & train) and bool(ids & test)
    assert mixed


def test_waiting_thread_runs_the_chunks_nobody_started():
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from episodes.images.image_decode import submit_chunks, wait_all

    release = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        blocker = pool.submit(release.wait)  # the only worker is busy
        done: dict[int, int] = {}
        tasks = submit_chunks(lambda i: done.__setitem__(i, threading.get_ident()), 40, pool, 1)
        assert len(tasks) == 4
        wait_all(tasks)  # returns although the worker never got to them
        assert sorted(done) == list(range(40))
        assert set(done.values()) == {threading.get_ident()}

        def fail(i: int) -> None:
            if i == 33:
                raise ValueError("chunk error 33")

        with pytest.raises(ValueError, match="chunk error 33"):
            wait_all(submit_chunks(fail, 40, pool, 1))
        release.set()
        blocker.result()
