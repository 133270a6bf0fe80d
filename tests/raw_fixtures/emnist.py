"""A tiny EMNIST distribution in NIST's layout: `gzip.zip` holding
`gzip/emnist-<split>-mapping.txt` and
`gzip/emnist-<split>-{train,test}-{images-idx3,labels-idx1}-ubyte.gz` for all six splits
(or the same files loose in a `gzip/` folder).

Images are random 28x28 uint8 arrays stored transposed, as in the real files; the fixture
keeps the upright arrays so a test can check orientation. The corrupt file is the byclass
test images file, cut short inside its gzip stream the way an interrupted download is: the
last rows cannot be decompressed.
"""

from __future__ import annotations

import gzip
import struct
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from beam_pipelines.sources.emnist import KNOWN_SPLITS
from tests.raw_fixtures.fixture_info import write_file

SIDE = 28
MEMBER_DIR = "gzip"


@dataclass
class EmnistFixture:
    root: Path
    path: Path  # the gzip.zip, or the gzip/ folder
    labels: dict[str, dict[str, np.ndarray]]  # split -> part -> raw labels in file order
    upright: dict[str, dict[str, np.ndarray]]  # split -> part -> (n, 28, 28) upright images
    corrupt: str  # member name of the truncated images file
    readable_rows: int  # rows of the corrupt file that still decompress
    mapping_lines: dict[str, str] = field(default_factory=dict)

    def class_names(self, split: str) -> list[str]:
        return list(KNOWN_SPLITS[split][1])

    def counts(self, split: str, parts=("train", "test"), readable_only: bool = True) -> list[int]:
        """Images per class (label order) that a conversion of `parts` writes."""
        first, chars = KNOWN_SPLITS[split]
        counts = np.zeros(len(chars), dtype=int)
        for part in parts:
            labels = self.labels[split][part].astype(int) - first
            if readable_only and split == "byclass" and part == "test":
                labels = labels[: self.readable_rows]
            counts += np.bincount(labels, minlength=len(chars))
        return counts.tolist()


def _mapping_text(split: str) -> str:
    first, chars = KNOWN_SPLITS[split]
    lines = []
    for i, char in enumerate(chars):
        codes = [ord(char)]
        if split == "letters":
            codes.append(ord(char.lower()))  # the letters mapping lists both cases
        lines.append(" ".join(str(v) for v in [first + i, *codes]))
    return "\n".join(lines) + "\n"


def _idx_images(upright: np.ndarray) -> bytes:
    stored = np.ascontiguousarray(upright.transpose(0, 2, 1))  # the raw files are transposed
    return struct.pack(">IIII", 2051, len(upright), SIDE, SIDE) + stored.tobytes()


def _idx_labels(labels: np.ndarray) -> bytes:
    return struct.pack(">II", 2049, len(labels)) + labels.astype(np.uint8).tobytes()


def _readable_rows(truncated_gzip: bytes) -> int:
    """Whole 28x28 rows a gzip reader can still deliver from a cut stream."""
    data = zlib.decompressobj(wbits=31).decompress(truncated_gzip)
    return max(0, (len(data) - 16) // (SIDE * SIDE))


def write_emnist_fixture(root: Path, seed: int = 0, zipped: bool = True) -> EmnistFixture:
    """Write all six splits under `root` (as `gzip.zip`, or a `gzip/` folder if not zipped)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    files: dict[str, bytes] = {}
    labels: dict[str, dict[str, np.ndarray]] = {}
    upright: dict[str, dict[str, np.ndarray]] = {}
    readable = 0
    corrupt = "emnist-byclass-test-images-idx3-ubyte.gz"
    for split, (first, chars) in KNOWN_SPLITS.items():
        files[f"emnist-{split}-mapping.txt"] = _mapping_text(split).encode()
        labels[split], upright[split] = {}, {}
        for part in ("train", "test"):
            if split == "byclass" and part == "train":
                per_class = [1 + c % 3 for c in range(len(chars))]  # unequal class sizes
            else:
                per_class = [1] * len(chars)
            raw = np.repeat(np.arange(first, first + len(chars)), per_class)
            raw = raw[rng.permutation(len(raw))].astype(np.uint8)  # real files are not sorted
            images = rng.integers(0, 256, size=(len(raw), SIDE, SIDE), dtype=np.uint8)
            labels[split][part], upright[split][part] = raw, images
            images_gz = gzip.compress(_idx_images(images), mtime=0)
            name = f"emnist-{split}-{part}-images-idx3-ubyte.gz"
            if name == corrupt:
                images_gz = images_gz[: int(len(images_gz) * 0.85)]
                readable = _readable_rows(images_gz)
            files[name] = images_gz
            files[f"emnist-{split}-{part}-labels-idx1-ubyte.gz"] = gzip.compress(
                _idx_labels(raw), mtime=0
            )
    if zipped:
        path = root / "gzip.zip"
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name in sorted(files):
                info = zipfile.ZipInfo(f"{MEMBER_DIR}/{name}", date_time=(2017, 2, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, files[name])
    else:
        path = root / MEMBER_DIR
        for name, data in files.items():
            write_file(path / name, data)
    return EmnistFixture(
        root=root,
        path=path,
        labels=labels,
        upright=upright,
        corrupt=corrupt,
        readable_rows=readable,
        mapping_lines={s: _mapping_text(s) for s in KNOWN_SPLITS},
    )
