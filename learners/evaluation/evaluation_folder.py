"""Where an evaluation's results go, and never over another evaluation's results.

An evaluation is described by its settings (run, checkpoint and its step, split, episode shape,
episode count, seed, inference, fine-tuning and other changed method options, lambda, shards, dataset, hardness
extractor). The default folder `RUN/eval/<name>` is named from the settings that tell
evaluations of one run apart (`test-best-transductive-5way1shot15query-600ep`), and every
folder records its full settings in summary.json: a folder that holds another evaluation (other
settings, or files of unknown settings) is refused unless the user asks to overwrite it.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from episodes.images.decoded_cache import file_sha256
from episodes.util.atomic_files import missing_parents, remove_if_empty, staging_folder
from episodes.util.cli_errors import UserError
from episodes.util.dead_job_leftovers import FolderLockedError, lock_and_clear

__all__ = [
    "check_output_folder",
    "default_label",
    "episode_shape",
    "folder_name",
    "RESULT_FILES",
    "result_folder",
    "SPLIT_DIGEST_CHARS",
    "split_file_tag",
    "SUMMARY",
]

SUMMARY = "summary.json"
RESULT_FILES = ("episodes.csv", "classes.csv", "snapshots.csv", SUMMARY)


def episode_shape(ways: int | None, shots: int | None, query: int | None) -> str:
    """'5way1shot15query' (fixed parts only), or 'variable' for Meta-Dataset episodes."""
    parts = [f"{v}{unit}" for v, unit in ((ways, "way"), (shots, "shot"), (query, "query")) if v]
    return "".join(parts) or "variable"


SPLIT_DIGEST_CHARS = 8  # of the split file's SHA-256 in the folder name


def split_file_tag(path: str | os.PathLike) -> str:
    """`split-<name>-<digest>`: the split file's name and the start of its content's SHA-256,
    so that two split files named alike (ATG sweeps write the same names for every dataset)
    get two folders, and a split file rewritten with other classes gets a new one."""
    return f"split-{Path(path).stem}-{file_sha256(path)[:SPLIT_DIGEST_CHARS]}"


def folder_name(settings: Mapping[str, Any], explicit_split_file: str | None = None) -> str:
    """The default folder name: split, checkpoint, inference, shape, count, then variants
    (a split file given to the evaluation adds `split_file_tag`)."""
    parts = [settings["split"], settings["checkpoint"]]
    if settings.get("inference"):
        parts.append(settings["inference"])
    if settings.get("episode_shards"):
        parts.append("shards-" + Path(settings["episode_shards"]).name)
    else:
        parts.append(episode_shape(settings["ways"], settings["shots"], settings["query"]))
    parts.append(f"{settings['episodes']}ep")
    if settings.get("seed"):
        parts.append(f"seed{settings['seed']}")
    if settings.get("base_novel_lambda") is not None:
        parts.append(f"lambda{settings['base_novel_lambda']:g}")
    if settings.get("finetune_freeze_bn"):
        parts.append("frozen-bn")
    if settings.get("finetune_augment") is False:
        parts.append("no-augment")
    for name, value in sorted((settings.get("options") or {}).items()):
        flag = name.replace("_", "-")
        parts.append(
            (flag if value else f"no-{flag}") if isinstance(value, bool) else f"{flag}{value}"
        )
    if settings.get("dataset"):
        parts.append("on-" + "+".join(Path(d).name for d in settings["dataset"].split(",")))
    if explicit_split_file:
        parts.append(split_file_tag(explicit_split_file))
    return "-".join(str(p) for p in parts)


def default_label(settings: Mapping[str, Any]) -> str:
    """A report column name that tells evaluations of one run apart."""
    what = settings.get("inference") or settings["method"]
    if settings.get("episode_shards"):
        shape = f"shards {Path(settings['episode_shards']).name}"
    elif settings["ways"] or settings["shots"]:
        shape = " ".join(
            f"{v}-{unit}"
            for v, unit in ((settings["ways"], "way"), (settings["shots"], "shot"))
            if v
        )
    else:
        shape = "variable"
    name = settings["run_name"]
    label = f"{name} {shape}" if what in name else f"{name} {what} {shape}"
    if settings["split"] != "test":
        label += f" ({settings['split']})"
    if settings.get("base_novel_lambda") is not None:
        label += f" lambda={settings['base_novel_lambda']:g}"
    return label


def _differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return [f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in keys]


def check_output_folder(out: Path, settings: Mapping[str, Any], overwrite: bool) -> None:
    """Refuse (before any work) a folder holding results of other or unknown settings."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--output {out}: exists and is not a folder")
    existing = next(p for p in (out, *out.parents) if p.exists())
    if not os.access(existing, os.W_OK):  # say so now, not after the evaluation ran
        raise PermissionError(errno.EACCES, "cannot write there", str(out))
    present = [name for name in RESULT_FILES if (out / name).is_file()]
    if not present or overwrite:
        return
    summary = out / SUMMARY
    try:
        old = json.loads(summary.read_text()).get("settings") if summary.is_file() else None
    except (json.JSONDecodeError, OSError, AttributeError):
        old = None
    if old is None:
        raise UserError(
            f"{out} already holds evaluation results ({', '.join(present)}) of unknown settings: "
            "choose another --output, or add --overwrite to replace them"
        )
    changes = _differences(old, settings)
    if changes:
        raise UserError(
            f"{out} holds an evaluation with other settings ({'; '.join(changes)}): choose "
            "another --output (the default folder name follows the settings), or add --overwrite"
        )


@contextmanager
def result_folder(out: Path) -> Iterator[Path]:
    """The folder to write an evaluation's files into, once the evaluation is done: a new
    `out` is filled as a hidden staging folder and renamed when every file is written, so a
    full disk, an error or Ctrl-C leaves no empty or half-written folder (nor an `eval/` folder
    created for it); an existing `out` is written in place, file by file, each atomically."""
    if out.is_dir():
        yield out
        return
    created = missing_parents(out)
    lock = staging = None
    try:
        try:  # one writer at a time; what an evaluation killed while writing left goes
            lock = lock_and_clear(out, "evaluation")
        except FolderLockedError as exc:
            raise UserError(str(exc)) from None
        staging = staging_folder(out)
        yield staging
        os.replace(staging, out)
        lock.release()
    except BaseException as exc:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if lock is not None:
            lock.release()
        staging = staging or out
        if isinstance(exc, OSError) and str(exc.filename or "").startswith(str(staging)):
            exc.filename = str(out) + str(exc.filename)[len(str(staging)) :]  # the path asked
        remove_if_empty(created)
        raise
