"""Whether a path is a converted dataset the reader can open: a local folder (a URL must be
fetched first, `python -m episodes.fetch`) holding its commit marker, `dataset_spec.json`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from episodes.records.dataset_spec import SPEC_FILENAME, SpecError

__all__ = ["is_remote", "require_local_dataset"]

_URL = re.compile(r"[a-zA-Z][-a-zA-Z0-9+.]*://")  # Beam's FileSystems scheme pattern


def is_remote(path: str | os.PathLike) -> bool:
    """True for a URL with a scheme (s3://, gs://, ...), as Beam's FileSystems reads them."""
    return not isinstance(path, Path) and _URL.match(str(path).strip()) is not None


SHARDS_MANIFEST = "episodes.json"  # what marks a finished episode-shards folder


def require_local_dataset(path: str | os.PathLike) -> None:
    """One clear line for what the reader cannot open: a URL (fetch it first) or a local folder
    holding files but no dataset_spec.json (a conversion that did not finish)."""
    text = str(path)
    if is_remote(text):
        raise SpecError(
            f"{text}: the reader needs a local folder; copy it first with "
            f"`python -m episodes.fetch --dataset {text} --output LOCAL_FOLDER` and pass LOCAL_FOLDER"
        )
    folder = Path(text)
    if folder.is_dir() and not (folder / SPEC_FILENAME).exists():
        if (folder / SHARDS_MANIFEST).is_file():
            raise SpecError(
                f"{folder}: episode shards (python -m beam_pipelines.episodes), not a converted "
                "dataset: evaluate on them with `learners.evaluate --episode-shards "
                f"{folder}`, or give the dataset they were drawn from"
            )
        files = [p.name for p in folder.iterdir() if not p.name.startswith(".")]
        if any(name.endswith((".tfrecords", ".index")) for name in files):
            raise SpecError(
                f"{folder}: incomplete dataset: {len(files)} files but no {SPEC_FILENAME} (the "
                "conversion did not finish; convert again with --overwrite)"
            )
