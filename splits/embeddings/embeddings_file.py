"""Class-embeddings file (npz): one mean feature vector per class, as ATG's input (ATG paper §4).

Keys: `class_names` (str array, N), `embeddings` (float32, N x D), `model` (str) and
`weights_hash` (str).  The content hash (sha256 over the names and the matrix bytes) is what a
split file records, so a split can be traced to the exact embeddings it came from.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from episodes.util.atomic_files import atomic_path
from episodes.util.cli_errors import UserError

__all__ = ["EmbeddingsFile", "EmbeddingsFileError", "REQUIRED_KEYS", "embedding_content_hash"]

REQUIRED_KEYS = ("class_names", "embeddings", "model", "weights_hash")


class EmbeddingsFileError(UserError, ValueError):
    """An embeddings file is missing, malformed, or does not match the dataset spec."""


@dataclass
class EmbeddingsFile:
    """Per-class embeddings with the names of their classes and the model that produced them."""

    class_names: list[str]
    embeddings: np.ndarray
    model: str = ""
    weights_hash: str = ""
    origin: str = "<memory>"

    def __post_init__(self) -> None:
        self.class_names = [str(n) for n in self.class_names]
        self.embeddings = np.asarray(self.embeddings)
        self.validate()

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    def validate(self) -> None:
        """Raise EmbeddingsFileError on shape mismatch, duplicate names, or non-finite values."""
        where = f"embeddings file {self.origin}"
        emb = self.embeddings
        if emb.ndim != 2:
            raise EmbeddingsFileError(f"{where}: 'embeddings' must be 2-D (N x D), got {emb.shape}")
        if not np.issubdtype(emb.dtype, np.floating):
            raise EmbeddingsFileError(
                f"{where}: 'embeddings' must be floating point, got {emb.dtype}"
            )
        if emb.shape[0] != len(self.class_names):
            raise EmbeddingsFileError(
                f"{where}: {len(self.class_names)} class names but {emb.shape[0]} embedding rows"
            )
        if emb.shape[0] == 0 or emb.shape[1] == 0:
            raise EmbeddingsFileError(f"{where}: empty embeddings {emb.shape}")
        dupes = [n for n, c in Counter(self.class_names).items() if c > 1]
        if dupes:
            raise EmbeddingsFileError(f"{where}: duplicate class names {dupes[:5]}")
        bad_rows = np.flatnonzero(~np.isfinite(emb).all(axis=1))
        if bad_rows.size:
            names = [self.class_names[i] for i in bad_rows[:5]]
            raise EmbeddingsFileError(
                f"{where}: {bad_rows.size} classes have NaN or infinite embeddings, e.g. {names}"
            )

    def content_hash(self) -> str:
        """sha256 of the class names (length-prefixed UTF-8) and the float32 matrix bytes."""
        return embedding_content_hash(self.class_names, self.embeddings)

    def check_class_names(self, spec_class_names: Sequence[str]) -> None:
        """Raise unless this file's class names are exactly the spec's (same set, same order)."""
        spec = [str(n) for n in spec_class_names]
        if spec == self.class_names:
            return
        have, want = set(self.class_names), set(spec)
        missing = [n for n in spec if n not in have]
        extra = [n for n in self.class_names if n not in want]
        if missing or extra:
            raise EmbeddingsFileError(
                f"embeddings file {self.origin}: class names differ from the spec's: "
                f"{len(missing)} spec classes missing (e.g. {missing[:3]}), "
                f"{len(extra)} unknown classes (e.g. {extra[:3]})"
            )
        first = next(i for i, (a, b) in enumerate(zip(spec, self.class_names)) if a != b)
        raise EmbeddingsFileError(
            f"embeddings file {self.origin}: class names are the spec's but in another order "
            f"(position {first}: spec {spec[first]!r}, file {self.class_names[first]!r})"
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the npz atomically (temporary file, then rename)."""
        path = Path(path)
        with atomic_path(path) as tmp, open(tmp, "wb") as handle:
            np.savez(
                handle,
                class_names=np.array(self.class_names, dtype=str),
                embeddings=np.ascontiguousarray(self.embeddings, dtype=np.float32),
                model=np.array(self.model),
                weights_hash=np.array(self.weights_hash),
            )
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> EmbeddingsFile:
        """Read and validate an embeddings npz (no pickled objects are loaded)."""
        path = Path(path)
        if not path.is_file():
            raise EmbeddingsFileError(f"embeddings file {path} does not exist")
        try:
            with np.load(path, allow_pickle=False) as data:
                missing = [k for k in REQUIRED_KEYS if k not in data.files]
                if missing:
                    raise EmbeddingsFileError(
                        f"embeddings file {path}: missing keys {missing}; expected {REQUIRED_KEYS}"
                    )
                names = [str(n) for n in data["class_names"].tolist()]
                emb = np.array(data["embeddings"])
                model = str(data["model"])
                weights_hash = str(data["weights_hash"])
        except EmbeddingsFileError:
            raise
        except (OSError, ValueError) as err:
            raise EmbeddingsFileError(f"embeddings file {path}: cannot read npz ({err})") from None
        return cls(names, emb, model, weights_hash, origin=str(path))


def embedding_content_hash(class_names: Sequence[str], embeddings: np.ndarray) -> str:
    """sha256 over N, D, each name (length-prefixed UTF-8) and the little-endian float32 matrix."""
    matrix = np.ascontiguousarray(embeddings, dtype="<f4")
    digest = hashlib.sha256()
    digest.update(f"{matrix.shape[0]}x{matrix.shape[1]}\n".encode())
    for name in class_names:
        raw = str(name).encode("utf-8")
        digest.update(len(raw).to_bytes(4, "little") + raw)
    digest.update(matrix.tobytes())
    return "sha256:" + digest.hexdigest()
