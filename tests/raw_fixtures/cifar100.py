"""A tiny CIFAR-100 python distribution: `cifar-100-python.tar.gz` with members
`cifar-100-python/`, `cifar-100-python/file.txt~`, `.../train`, `.../test`, `.../meta` in that
order (or the extracted `cifar-100-python/` folder).

The pickles have the real keys (bytes, as Python 2 wrote them): `data` (rows of 3072 uint8:
1024 red, 1024 green, 1024 blue), `fine_labels`, `coarse_labels`, `filenames`, `batch_label`;
`meta` has the real 100 fine and 20 coarse label names, and the coarse labels follow the real
superclass table. Each class has 2 train and 1 test image; one extra train row carries the
impossible fine label 100 (the corrupt entry).
"""

from __future__ import annotations

import gzip
import io
import pickle
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from episodes.records.index_conventions import CIFAR100_SUPERCLASS_MEMBERS

SUPERCLASSES = CIFAR100_SUPERCLASS_MEMBERS  # as published with the dataset
FINE_NAMES = sorted(n for names in SUPERCLASSES.values() for n in names)
COARSE_NAMES = sorted(SUPERCLASSES)
COARSE_OF = {f: COARSE_NAMES.index(c) for c, names in SUPERCLASSES.items() for f in names}
ROOT = "cifar-100-python"
PER_CLASS = {"train": 2, "test": 1}
MTIME = 1_241_000_000


@dataclass
class Cifar100Fixture:
    root: Path
    path: Path  # the .tar.gz, or the extracted folder
    fine: dict[str, np.ndarray]  # part -> fine labels per row (the corrupt row included)
    data: dict[str, np.ndarray]  # part -> (rows, 3072) uint8
    corrupt: str  # "<part>[<row>]" of the row with an impossible label

    fine_names = FINE_NAMES
    coarse_names = COARSE_NAMES
    coarse_of = COARSE_OF


def _part(rng: np.random.Generator, part: str, corrupt: bool) -> tuple[dict, np.ndarray]:
    fine = np.repeat(np.arange(len(FINE_NAMES)), PER_CLASS[part])
    fine = fine[rng.permutation(len(fine))]
    if corrupt:
        fine = np.insert(fine, len(fine) // 2, len(FINE_NAMES))  # label 100 does not exist
    coarse = [COARSE_OF[FINE_NAMES[f]] if f < len(FINE_NAMES) else 0 for f in fine]
    data = rng.integers(0, 256, size=(len(fine), 3 * 32 * 32), dtype=np.uint8)
    names = [
        f"{FINE_NAMES[f] if f < len(FINE_NAMES) else 'unknown'}_s_{i:06d}.png".encode()
        for i, f in enumerate(fine)
    ]
    batch = {
        b"filenames": names,
        b"batch_label": f"{part}ing batch 1 of 1".encode(),
        b"fine_labels": [int(f) for f in fine],
        b"coarse_labels": coarse,
        b"data": data,
    }
    return batch, fine


def _info(name: str, size: int | None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = MTIME
    if size is None:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    else:
        info.size, info.mode = size, 0o644
    return info


def write_cifar100_fixture(root: Path, seed: int = 0, extracted: bool = False) -> Cifar100Fixture:
    """Write `cifar-100-python.tar.gz` (or the extracted folder) under `root`."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    members: dict[str, bytes] = {"file.txt~": b""}
    fine, data = {}, {}
    for part in ("train", "test"):
        batch, labels = _part(rng, part, corrupt=part == "train")
        members[part] = pickle.dumps(batch, protocol=2)
        fine[part], data[part] = labels, batch[b"data"]
    meta = {
        b"fine_label_names": [n.encode() for n in FINE_NAMES],
        b"coarse_label_names": [n.encode() for n in COARSE_NAMES],
    }
    members["meta"] = pickle.dumps(meta, protocol=2)
    corrupt_row = int(np.flatnonzero(fine["train"] == len(FINE_NAMES))[0])
    if extracted:
        path = root / ROOT
        path.mkdir(exist_ok=True)
        for name, payload in members.items():
            (path / name).write_bytes(payload)
    else:
        path = root / f"{ROOT}.tar.gz"
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
            archive.addfile(_info(ROOT, None))
            for name in ("file.txt~", "train", "test", "meta"):  # the real archive's order
                payload = members[name]
                archive.addfile(_info(f"{ROOT}/{name}", len(payload)), io.BytesIO(payload))
        path.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return Cifar100Fixture(
        root=root, path=path, fine=fine, data=data, corrupt=f"train[{corrupt_row}]"
    )
