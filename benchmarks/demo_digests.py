"""A digest per stage of `make demo`, to find where two machines part (issue 30, item 2).

    python -m benchmarks.demo_digests [--data data] [--output data/demo-digests.txt]

Each stage's digest covers what the next stage reads and nothing that names the machine (no
paths, timings or library versions): the glyph PNGs, the converted records, the class
embeddings' arrays, the split files' class lists, each run's weights (`weights_hash`), each
evaluation's per-episode results. Two machines that print the same first lines and differ from
one stage on have their difference in that stage; README's "Reproducing the demo" lists this
machine's digests.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

SHOWN_HEX = 16  # digits shown per digest: plenty to tell two stages apart


def files_digest(root: Path, pattern: str) -> tuple[str, int]:
    """sha256 over (relative name, bytes) of every file matching `pattern`, in name order."""
    digest = hashlib.sha256()
    files = sorted(p for p in root.rglob(pattern) if p.is_file())
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest(), len(files)


def embeddings_digest(path: Path) -> str:
    """sha256 of an embeddings file's class names and float array (not the zip's bytes)."""
    from splits.embeddings.embeddings_file import EmbeddingsFile

    embeddings = EmbeddingsFile.load(path)
    digest = hashlib.sha256("\n".join(embeddings.class_names).encode() + b"\0")
    array = np.ascontiguousarray(embeddings.embeddings)
    digest.update(f"{array.dtype}{array.shape}".encode() + array.tobytes())
    return digest.hexdigest()


def split_digest(path: Path) -> str:
    """sha256 of a split file's three class lists."""
    from episodes.records.split_file import read_split_file

    split = read_split_file(path)
    lists = ["\n".join(names) for names in (split.train, split.valid, split.test)]
    return hashlib.sha256("\0".join(lists).encode()).hexdigest()


def weights_digest(run: Path) -> str:
    """The `weights_hash` of a run's last checkpoint (its model's tensors, in key order)."""
    import torch

    from learners.training.checkpoint_file import resolve_checkpoint, weights_hash

    payload = torch.load(resolve_checkpoint(run), map_location="cpu", weights_only=True)
    return weights_hash(payload["model"]).removeprefix("sha256:")


def episodes_digest(folder: Path) -> str:
    """sha256 of an evaluation's per-episode rows, without timing columns."""
    with open(folder / "episodes.csv", newline="") as handle:  # '#' lines: provenance notes
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    kept = [{k: v for k, v in row.items() if "second" not in k} for row in rows]
    text = "\n".join(",".join(f"{k}={row[k]}" for k in sorted(row)) for row in kept)
    return hashlib.sha256(text.encode()).hexdigest()


def stage_digests(data: Path) -> Iterable[tuple[str, str]]:
    """(stage, digest) for every stage of the demo found under `data`, in pipeline order."""
    glyphs = data / "raw" / "omniglot_glyphs"
    if glyphs.is_dir():
        digest, count = files_digest(glyphs, "*.png")
        yield f"glyphs ({count} PNG files)", digest
    converted = data / "converted" / "omniglot"
    if converted.is_dir():
        digest, count = files_digest(converted, "*.tfrecords")
        yield f"records ({count} class files)", digest
    for path in sorted((data / "embeddings").glob("*.npz")):
        yield f"embeddings {path.name}", embeddings_digest(path)
    for path in sorted((data / "splits").rglob("*.json")):
        yield f"split {path.relative_to(data / 'splits')}", split_digest(path)
    runs = data / "runs"
    for run in sorted(p.parent.parent for p in runs.glob("*/checkpoints/last.pt")):
        yield f"weights {run.name}", weights_digest(run)
    for folder in sorted(p.parent for p in (runs / "eval").glob("*/episodes.csv")):
        yield f"episodes {folder.name}", episodes_digest(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.demo_digests", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--data", type=Path, default=Path("data"), help="the demo's DATA folder")
    parser.add_argument("--output", type=Path, default=None, help="also write the lines here")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"error: --data {args.data}: no such folder (run make demo first)", file=sys.stderr)
        return 2
    lines = [f"{digest[:SHOWN_HEX]}  {stage}" for stage, digest in stage_digests(args.data)]
    if not lines:
        print(f"error: --data {args.data}: no demo stage found", file=sys.stderr)
        return 2
    text = "\n".join(lines) + "\n"
    if args.output is not None:
        args.output.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
