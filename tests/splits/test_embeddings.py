"""Embeddings npz contract: round trip, content hash, validation before any work."""

import numpy as np
import pytest

from splits.embeddings.embeddings_file import EmbeddingsFile, EmbeddingsFileError


def _emb(n=5, d=3, seed=0):
    x = np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    return EmbeddingsFile([f"c{i}" for i in range(n)], x, "resnet", "w123")


def test_round_trip_keeps_names_values_and_hash(tmp_path):
    emb = _emb()
    path = emb.save(tmp_path / "e.npz")
    back = EmbeddingsFile.load(path)
    assert back.class_names == emb.class_names
    assert back.embeddings.dtype == np.float32
    np.testing.assert_array_equal(back.embeddings, emb.embeddings)
    assert (back.model, back.weights_hash) == ("resnet", "w123")
    assert back.content_hash() == emb.content_hash()


def test_hash_changes_with_names_and_values():
    emb = _emb()
    base = emb.content_hash()
    assert base.startswith("sha256:") and len(base) == 7 + 64
    renamed = EmbeddingsFile(["x", *emb.class_names[1:]], emb.embeddings)
    changed = emb.embeddings.copy()
    changed[2, 1] += 1e-3
    assert renamed.content_hash() != base
    assert EmbeddingsFile(emb.class_names, changed).content_hash() != base
    # Same content in float64 hashes the same (the hash is over the float32 matrix).
    assert EmbeddingsFile(emb.class_names, emb.embeddings.astype(np.float64)).content_hash() == base


def test_nan_and_duplicates_are_rejected_naming_the_class():
    x = np.ones((3, 2), np.float32)
    x[1, 0] = np.nan
    with pytest.raises(EmbeddingsFileError, match=r"1 classes have NaN.*\['b'\]"):
        EmbeddingsFile(["a", "b", "c"], x)
    with pytest.raises(EmbeddingsFileError, match="duplicate class names"):
        EmbeddingsFile(["a", "a", "c"], np.ones((3, 2)))
    with pytest.raises(EmbeddingsFileError, match="3 class names but 2 embedding rows"):
        EmbeddingsFile(["a", "b", "c"], np.ones((2, 2)))


def test_missing_keys_and_missing_file(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, embeddings=np.ones((2, 2), np.float32))
    with pytest.raises(EmbeddingsFileError, match="missing keys"):
        EmbeddingsFile.load(path)
    with pytest.raises(EmbeddingsFileError, match="does not exist"):
        EmbeddingsFile.load(tmp_path / "none.npz")


def test_class_names_must_be_the_specs():
    emb = _emb(3)
    emb.check_class_names(["c0", "c1", "c2"])
    with pytest.raises(EmbeddingsFileError, match="1 spec classes missing"):
        emb.check_class_names(["c0", "c1", "zz"])
    with pytest.raises(EmbeddingsFileError, match="another order"):
        emb.check_class_names(["c1", "c0", "c2"])
