"""The class-embedding Beam job: means of backbone features, determinism, pretraining, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from episodes.images.image_decode import decode_image
from episodes.records.dataset_spec import DatasetSpec
from episodes.records.record_reader import RecordReader
from learners.feed.episode_batch import images_to_tensor
from splits import embed as embed_cli
from splits.embeddings.embeddings_file import EmbeddingsFile
from splits.embeddings.feature_extractor import load_feature_extractor, weights_hash
from splits.embeddings.pipeline import (
    EmbedOptions,
    OrderedSumFn,
    embed_dataset,
    plan_chunks,
)
from tests.fixtures.embedding_inputs import (
    COUNTS,
    IMAGE_SIZE,
    write_random_checkpoint,
    write_tiny_dataset,
)
from tests.fixtures.local_runner import make_local_runner

OPTIONS = EmbedOptions(batch_size=3, chunk_size=4, device="cpu", progress=False)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    spec = write_tiny_dataset(root / "tiny")
    checkpoint = write_random_checkpoint(root / "run" / "checkpoints" / "last.pt")
    return spec, checkpoint


@pytest.fixture(scope="module")
def one_worker(tiny, tmp_path_factory):
    spec, checkpoint = tiny
    out = tmp_path_factory.mktemp("one") / "emb.npz"
    report = embed_dataset(spec.root, checkpoint, out, make_local_runner(1), OPTIONS, workers=1)
    return report, EmbeddingsFile.load(out)


def direct_class_means(spec: DatasetSpec, checkpoint: Path) -> np.ndarray:
    """Mean feature of every class computed image by image, outside Beam."""
    backbone, normalization, _ = load_feature_extractor(checkpoint, "cpu")
    reader = RecordReader(spec.root)
    means = []
    for class_id, count in enumerate(spec.images_per_class):
        images = np.stack(
            [decode_image(reader.read_example(class_id, k)[0], IMAGE_SIZE) for k in range(count)]
        )
        with torch.no_grad():
            features = backbone(images_to_tensor(images, "cpu", normalization)).numpy()
        means.append(features.astype(np.float64).mean(axis=0))
    return np.stack(means)


def test_chunks_cover_every_record_once() -> None:
    chunks = plan_chunks(COUNTS, 4)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for class_id, count in enumerate(COUNTS):
        mine = [c for c in chunks if c.class_id == class_id]
        covered = [k for c in mine for k in range(c.start, c.stop)]
        assert covered == list(range(count))
        assert all(0 < c.stop - c.start <= 4 for c in mine)
    assert len(chunks) == sum(-(-n // 4) for n in COUNTS)


def test_partial_sums_are_added_in_chunk_order_whatever_their_arrival() -> None:
    rng = np.random.default_rng(1)
    parts = [(i, rng.normal(size=8) * 10.0 ** rng.integers(-8, 8), int(i) + 1) for i in range(9)]
    combine = OrderedSumFn()
    forward = combine.extract_output(combine.add_input(list(parts[:4]), parts[4]) + parts[5:])
    shuffled = [parts[i] for i in rng.permutation(9)]
    merged = combine.merge_accumulators([shuffled[:3], shuffled[3:]])
    backward = combine.extract_output(merged)
    assert forward[1] == backward[1] == sum(range(1, 10))
    assert forward[0].tobytes() == backward[0].tobytes()


def test_rows_are_the_mean_of_each_class_features(tiny, one_worker) -> None:
    spec, checkpoint = tiny
    report, result = one_worker
    backbone, _, info = load_feature_extractor(checkpoint)
    assert result.class_names == spec.class_names
    assert result.embeddings.shape == (len(COUNTS), backbone.out_dim)
    assert result.embeddings.dtype == np.float32
    assert report.images == sum(COUNTS) and report.skipped == []
    np.testing.assert_allclose(
        result.embeddings, direct_class_means(spec, checkpoint), rtol=1e-5, atol=1e-6
    )
    assert result.model == info.name and "cnn4" in result.model
    assert result.weights_hash == weights_hash(backbone.state_dict()) == info.weights_hash
    result.check_class_names(spec.class_names)


@pytest.mark.slow
def test_one_and_two_workers_give_identical_files(tiny, one_worker, tmp_path) -> None:
    spec, checkpoint = tiny
    first_report, first = one_worker
    out = tmp_path / "two.npz"
    embed_dataset(spec.root, checkpoint, out, make_local_runner(2), OPTIONS, workers=2)
    assert out.read_bytes() == first_report.output.read_bytes()
    second = EmbeddingsFile.load(out)
    assert second.embeddings.tobytes() == first.embeddings.tobytes()
    assert (second.class_names, second.model, second.weights_hash) == (
        first.class_names,
        first.model,
        first.weights_hash,
    )
    assert second.content_hash() == first.content_hash()


def test_weights_hash_follows_the_weights(tiny, tmp_path) -> None:
    _, checkpoint = tiny
    payload = torch.load(checkpoint, weights_only=True)
    key = next(k for k in payload["model"] if k.startswith("backbone.") and k.endswith("weight"))
    payload["model"][key] = payload["model"][key].clone()
    payload["model"][key].view(-1)[0] += 1e-3
    changed = tmp_path / "changed.pt"
    torch.save(payload, changed)
    same = load_feature_extractor(checkpoint)[2].weights_hash
    assert load_feature_extractor(checkpoint)[2].weights_hash == same
    assert load_feature_extractor(changed)[2].weights_hash != same
    # A run folder resolves to its last checkpoint.
    assert load_feature_extractor(checkpoint.parent.parent)[2].weights_hash == same


def test_unreadable_record_is_skipped_and_reported(tmp_path, capsys) -> None:
    spec = write_tiny_dataset(tmp_path / "bad", counts=(4, 3), corrupt=(0, 2))
    checkpoint = write_random_checkpoint(tmp_path / "ck.pt")
    out = tmp_path / "bad.npz"
    options = EmbedOptions(batch_size=3, chunk_size=4, device="cpu", progress_every_s=0.0)
    report = embed_dataset(spec.root, checkpoint, out, make_local_runner(1), options)
    progress = capsys.readouterr().err
    assert "2 classes, 7 images" in progress  # the plan line
    assert "6/7 images (" in progress and "images/s, ETA" in progress  # 1 record skipped
    assert "2 classes begun" in progress
    assert report.images == 6
    assert [(Path(s["path"]).name, s["record"]) for s in report.skipped] == [("0.tfrecords", 2)]
    assert "not a decodable image" in report.skipped[0]["reason"]
    assert "skipped 1 unreadable records" in report.summary()
    backbone, normalization, _ = load_feature_extractor(checkpoint)
    reader = RecordReader(spec.root)
    kept = np.stack([decode_image(reader.read_example(0, k)[0], IMAGE_SIZE) for k in (0, 1, 3)])
    with torch.no_grad():
        expected = backbone(images_to_tensor(kept, "cpu", normalization)).numpy().mean(axis=0)
    np.testing.assert_allclose(EmbeddingsFile.load(out).embeddings[0], expected, rtol=1e-5)


def test_pretrain_runs_end_to_end_and_keeps_its_checkpoint(tiny, tmp_path, capsys) -> None:
    spec, _ = tiny
    out = tmp_path / "pre" / "emb.npz"
    argv = [
        "--dataset", str(spec.root), "--pretrain", "cnn4", "--pretrain-steps", "2",
        "--pretrain-batch-size", "8", "--image-size", "16", "--width", "0.25",
        "--output", str(out), "--device", "cpu", "--no-progress",
    ]  # fmt: skip
    assert embed_cli.main(argv) == 0
    checkpoint = tmp_path / "pre" / "emb.checkpoint" / "checkpoints" / "last.pt"
    assert checkpoint.is_file()
    assert torch.load(checkpoint, weights_only=True)["step"] == 2
    split = json.loads((checkpoint.parent.parent / "all_classes_split.json").read_text())
    assert split["train"] == spec.class_names and split["valid"] == split["test"] == []
    result = EmbeddingsFile.load(out)
    _, _, info = load_feature_extractor(checkpoint)
    assert result.class_names == spec.class_names
    assert result.embeddings.shape == (len(COUNTS), info.feature_dim)
    assert result.weights_hash == info.weights_hash and "step 2" in result.model
    assert str(out) in capsys.readouterr().out


def _fails(argv: list[str], capsys) -> str:
    assert embed_cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    return err


def test_bad_inputs_fail_with_one_clear_line_before_work(tiny, tmp_path, capsys) -> None:
    spec, checkpoint = tiny
    out = tmp_path / "e.npz"
    data, model = ["--dataset", str(spec.root)], ["--model", str(checkpoint)]
    missing = tmp_path / "nowhere"
    err = _fails(["--dataset", str(missing), *model, "--output", str(out)], capsys)
    assert str(missing) in err and "converted dataset" in err
    err = _fails([*data, "--model", str(missing / "x.pt"), "--output", str(out)], capsys)
    assert str(missing / "x.pt") in err
    err = _fails([*data, *model, "--pretrain", "cnn4", "--output", str(out)], capsys)
    assert "not both" in err
    err = _fails([*data, "--output", str(out)], capsys)
    assert "--model" in err and "--pretrain" in err
    err = _fails([*data, *model, "--image-size", "32", "--output", str(out)], capsys)
    assert "--image-size" in err
    err = _fails([*data, *model, "--output", str(tmp_path / "e.json")], capsys)
    assert "e.json" in err and ".npz" in err
    not_torch = tmp_path / "junk.pt"
    not_torch.write_bytes(b"junk")
    err = _fails([*data, "--model", str(not_torch), "--output", str(out)], capsys)
    assert str(not_torch) in err and "not a torch checkpoint" in err
    err = _fails([*data, "--pretrain", "vgg99", "--output", str(out)], capsys)
    assert "vgg99" in err
    # --pretrain with a missing dataset fails before any training starts.
    err = _fails(["--dataset", str(missing), "--pretrain", "cnn4", "--output", str(out)], capsys)
    assert str(missing) in err
    # One dataset: a second --dataset is refused, naming both.
    err = _fails([*data, "--dataset", str(missing), *model, "--output", str(out)], capsys)
    assert "--dataset given 2 times" in err and str(missing) in err
    assert not out.exists() and not out.with_suffix(".checkpoint").exists()
