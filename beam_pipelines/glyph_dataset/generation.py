"""`generate`: draw every character (in worker processes when there are many) and write the
dataset into a staging folder that replaces the output only once complete.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from beam_pipelines.glyph_dataset.alphabet_plan import plan_alphabets
from beam_pipelines.glyph_dataset.config import GlyphDatasetConfig, check_values
from beam_pipelines.glyph_dataset.drawing import CharacterTask, draw_character
from beam_pipelines.glyph_dataset.manifest import (
    MANIFEST_NAME,
    build_manifest,
    environment_fingerprint,
)
from beam_pipelines.glyph_dataset.output_check import check_output
from beam_pipelines.glyph_dataset.output_writers import FolderWriter, ZipWriter, character_folders
from beam_pipelines.glyph_dataset.summary import GlyphDatasetSummary, summary_from_manifest
from episodes.util.atomic_files import replace_folder, staging_folder
from episodes.util.progress_lines import ProgressLines

__all__ = ["generate"]


def _default_workers(characters: int) -> int:
    if characters < 100:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def _drawn_characters(tasks: list[CharacterTask], workers: int) -> Iterator[list[bytes]]:
    """PNG bytes per character, in task order; `workers` > 1 uses spawned processes."""
    if workers <= 1:
        yield from map(draw_character, tasks)
        return
    chunk = max(1, min(16, len(tasks) // (workers * 8)))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
    try:
        yield from pool.map(draw_character, tasks, chunksize=chunk)
    finally:  # on an error or Ctrl-C, drop the queued characters instead of drawing them
        pool.shutdown(wait=True, cancel_futures=True)


def generate(
    output_dir: str | Path,
    config: GlyphDatasetConfig,
    *,
    overwrite: bool = False,
    workers: int | None = None,
    progress: bool = True,
) -> GlyphDatasetSummary:
    """Write the glyph dataset in Omniglot's layout to `output_dir` and describe it.

    Skips the work when `output_dir` already holds this exact dataset (same parameters,
    generator version and environment) unless `overwrite`; regenerates our own output with
    the same parameters when it is stale (other versions) or incomplete. Raises
    GlyphDatasetError on bad parameters or an occupied output folder, before any drawing.
    """
    started = time.perf_counter()
    output_dir = Path(output_dir).expanduser().absolute()
    check_values(config)
    state, manifest = check_output(output_dir, config, overwrite)
    if state == "cached":
        assert manifest is not None
        return summary_from_manifest(output_dir, manifest, time.perf_counter() - started, True)

    plans = plan_alphabets(config)  # validates the rest
    environment = environment_fingerprint()
    tasks = [
        CharacterTask(config.seed, config.size, config.examples, plan.name, cp, plan.families)
        for plan in plans
        for cp in plan.codepoints
    ]
    workers = _default_workers(len(tasks)) if workers is None else max(1, workers)
    staging = staging_folder(output_dir)  # unlike mkdtemp, honours the umask: not private
    try:
        writer = ZipWriter(staging) if config.as_zip else FolderWriter(staging)
        folders = character_folders(plans)
        lines = ProgressLines(
            "drawing glyphs", len(tasks) * config.examples, "images", enabled=progress
        )
        for (folder, index), images in zip(folders, _drawn_characters(tasks, workers)):
            for drawer, data in enumerate(images, start=1):
                writer.add(f"{folder}/{index:04d}_{drawer:02d}.png", data)
            lines.advance(len(images))
        files = writer.close()
        manifest = build_manifest(config, environment, plans)
        manifest["files"] = files
        (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1) + "\n", "utf-8")
        replace_folder(staging, output_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return summary_from_manifest(output_dir, manifest, time.perf_counter() - started, False)
