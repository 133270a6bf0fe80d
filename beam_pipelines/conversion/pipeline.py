"""Run one conversion: plan (validates), Beam pipeline into a temp folder, move into place.

Nothing is half-written: output goes to a hidden sibling folder and is renamed into place
only when the pipeline succeeded; an existing output folder is refused unless overwrite.
"""

from __future__ import annotations

import shutil
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apache_beam as beam

from beam_pipelines.conversion.frame_spill import remove_spill
from beam_pipelines.conversion.progress import ProgressReporter
from beam_pipelines.conversion.writer import ConvertUnits, units_in_this_process
from beam_pipelines.runners.interrupt_exit import exit_on_interrupt, interrupts_deferred
from beam_pipelines.runners.job_faults import unwritable_output_in_one_line
from beam_pipelines.runners.options import RunnerChoice
from beam_pipelines.runners.output_lock import (
    OutputLock,
    acquire_output_lock,
    clear_remote_leftovers,
    remove_leftovers,
)
from beam_pipelines.sources.base import LayoutError, Source
from episodes.records.dataset_spec import SPEC_FILENAME, DatasetSpec, Split, load_spec
from episodes.storage import paths as storage_paths
from episodes.util.atomic_files import (
    missing_parents,
    remove_if_empty,
    replace_folder,
    staging_folder,
)
from episodes.util.cli_errors import OutputExistsError
from episodes.util.dead_job_leftovers import clear_leftovers
from episodes.util.output_overlap import refuse_overlap

__all__ = [
    "abort_output",
    "begin_output",
    "check_output",
    "clean_leftovers",
    "commit_output",
    "conversion_inputs",
    "ConversionReport",
    "convert",
    "lock_local_output",
    "output_exists",
    "remote_input_sources",
]


@dataclass
class ConversionReport:
    output: Path | str  # a URL for object storage
    spec: DatasetSpec
    seconds: float
    runner: str
    rejected: list[dict] = field(default_factory=list)

    @property
    def images(self) -> int:
        return self.spec.total_images

    @property
    def images_per_second(self) -> float:
        return self.images / max(self.seconds, 1e-9)

    def summary(self) -> str:
        spec = self.spec
        lines = [f"Converted {spec.name} -> {self.output}"]
        if spec.has_splits:
            per = ", ".join(f"{s.value} {len(spec.classes(s))}" for s in Split)
            lines.append(f"  classes: {spec.num_classes} ({per})")
        else:
            lines.append(f"  classes: {spec.num_classes} (no fixed split: use a split file)")
        if spec.hierarchy is not None:
            lines.append(f"  hierarchy: {type(spec.hierarchy).__name__}")
        lines.append(f"  images: {self.images:,} written, {len(self.rejected)} rejected")
        for item in self.rejected[:10]:
            lines.append(f"    rejected {item['path']}: {item['reason']}")
        if len(self.rejected) > 10:
            lines.append(f"    ... {len(self.rejected) - 10} more in dataset_spec.json provenance")
        lines.append(
            f"  time: {self.seconds:.1f} s, {self.images_per_second:,.0f} images/s, {self.runner}"
        )
        return "\n".join(lines)


def check_output(output: Path | str, overwrite: bool) -> None:
    if storage_paths.is_remote(output):
        return storage_paths.check_output_prefix(str(output), overwrite, SPEC_FILENAME)
    if output.exists() and not output.is_dir():
        raise OutputExistsError(f"{output}: exists and is not a folder")
    if output.exists() and any(output.iterdir()) and not overwrite:
        raise OutputExistsError(
            f"{output}: output folder exists and is not empty (pass --overwrite)"
        )


def output_exists(output: Path | str) -> bool:
    """Whether `output` holds something now (a folder, or objects under a prefix): what an
    interrupted run may say "is as it was" about."""
    if storage_paths.is_remote(output):
        try:
            return bool(storage_paths.list_objects(str(output)))
        except OSError:
            return False  # unknown: say only that this run wrote nothing there
    return Path(output).exists()


def begin_output(output: Path | str, overwrite: bool) -> Path | str:
    """Check `output` may be written and create the hidden temp folder the job writes into."""
    check_output(output, overwrite)
    if storage_paths.is_remote(output):
        return storage_paths.staging_prefix(str(output))
    return staging_folder(output)


def commit_output(tmp: Path | str, output: Path | str) -> None:
    """Move a finished temp folder into place (replacing an old output only now); in object
    storage, copy it with dataset_spec.json last (the commit marker)."""
    remove_spill(tmp)
    if storage_paths.is_remote(output):
        storage_paths.publish_staged(str(tmp), str(output), SPEC_FILENAME)
        return
    load_spec(tmp)  # the job must have written a readable spec
    replace_folder(tmp, output)


def abort_output(tmp: Path | str) -> None:
    if storage_paths.is_remote(tmp):
        return storage_paths.discard_prefix(str(tmp))
    shutil.rmtree(tmp, ignore_errors=True)


def conversion_inputs(input_path: str | Path | None, config: Any) -> list[tuple[str, Any]]:
    """What a conversion reads, as (flag, path) pairs for the output/input rule: the raw input
    and the source's file options (a `--split-file`, a TFDS data folder)."""
    prepared = getattr(config, "tfds_data_dir", None)  # a TFDS folder, read instead of --input
    inputs: list[tuple[str, Any]] = [
        ("--tfds-data-dir", prepared) if prepared else ("--input", input_path)
    ]
    inputs.append(("--split-file", getattr(config, "split_file", None)))
    return inputs


def remote_input_sources() -> list[str]:
    """Names of the sources that read their raw files from object storage too."""
    from beam_pipelines.sources import SOURCES

    return sorted(name for name, cls in SOURCES.items() if cls.remote_input)


def clean_leftovers(output: Path | str) -> list[str]:
    """Remove what killed runs left beside `output`, converting nothing (`convert
    --clean-only`): local staging and replaced folders (refused while a live conversion holds
    the output's lock); in object storage the staging prefixes beside it and the S3 multipart
    uploads open there or under the output itself (a publish killed mid-copy). One stderr line
    per removed thing; returns their names."""
    if storage_paths.is_remote(output):
        removed = clear_remote_leftovers(str(output))
        aborted = storage_paths.abort_open_uploads(storage_paths.folder_url(str(output)) + "/")
        if aborted:
            print(f"aborted {aborted} unfinished upload(s) under {output}", file=sys.stderr)
        return removed + [f"{output}: {aborted} upload(s)"] * bool(aborted)
    lock = acquire_output_lock(output)
    try:
        removed = remove_leftovers(lock)
    finally:
        lock.release()
    for path in removed:
        print(f"removed {path}: left by a conversion that did not finish", file=sys.stderr)
    return [str(path) for path in removed]


def lock_local_output(output: Path | str) -> OutputLock | None:
    """Lock a local output folder (refusing a second conversion to it) and remove what dead
    runs left beside it, naming each on stderr; for object storage (no locks there) only the
    leftovers are removed, and None returned."""
    if storage_paths.is_remote(output):
        clear_remote_leftovers(str(output))
        return None
    lock = acquire_output_lock(output)
    clear_leftovers(lock, lock.output, "conversion")
    return lock


def convert(
    source: Source,
    input_path: str | Path,
    output: str | Path,
    runner: RunnerChoice,
    overwrite: bool = False,
    exit_on_ctrl_c: bool = False,
) -> ConversionReport:
    """Convert `input_path` with `source` into the dataset folder `output` (local paths or
    object-storage URLs, see episodes.storage.paths). `exit_on_ctrl_c` (the CLI): a
    Ctrl-C while the pipeline runs cleans up and ends the process (beam_pipelines.
    interrupt_exit)."""
    refuse_overlap(("--output", output), conversion_inputs(input_path, source.config))
    storage_paths.use_options(runner.options)
    if storage_paths.is_remote(input_path) and not source.remote_input:
        raise LayoutError(
            f"--input {input_path}: the {source.name} source reads local files only; copy the "
            f"raw files to a local folder (remote --input: {', '.join(remote_input_sources())})"
        )
    runner.check_storage(input_path, output)
    output = str(output) if storage_paths.is_remote(output) else Path(output)
    created = [] if storage_paths.is_remote(output) else missing_parents(output)
    lock = lock_local_output(output)
    try:
        return _convert_locked(
            source, input_path, output, runner, overwrite, exit_on_ctrl_c, lock, created
        )
    finally:
        if lock is not None:
            lock.release()
        remove_if_empty(created)  # folders made for an output that was not written


def _convert_locked(source, input_path, output, runner, overwrite, exit_on_ctrl_c, lock, created):
    check_output(output, overwrite)
    input_path = storage_paths.input_location(input_path)
    plan = source.plan(input_path)  # validates the layout before anything runs
    if not plan.classes:
        raise LayoutError(f"{input_path}: no classes found; expected {source.layout}")
    existed = output_exists(output)
    tmp = begin_output(output, overwrite)

    def on_ctrl_c() -> None:
        abort_output(tmp)
        if lock is not None:
            lock.release()
        remove_if_empty(created)

    stopped = f"interrupted: conversion stopped and its staging folder removed; {output} " + (
        "is as it was" if existed else "was not written"
    )
    start = time.monotonic()
    try:
        with (
            exit_on_interrupt(on_ctrl_c, stopped) if exit_on_ctrl_c else nullcontext(),
            unwritable_output_in_one_line(output),  # a full disk: one line naming the output
        ):
            in_process = runner.one_local_worker
            with (
                ProgressReporter(tmp, plan.expected_items),
                units_in_this_process(plan.units) if in_process else nullcontext() as token,
                beam.Pipeline(runner=runner.runner, options=runner.options) as pipeline,
            ):
                _ = pipeline | "Convert" >> ConvertUnits(
                    source, plan, str(tmp), spread=not in_process, units_token=token
                )
        with interrupts_deferred():  # never half-published
            commit_output(tmp, output)
    except BaseException:
        abort_output(tmp)
        raise
    seconds = time.monotonic() - start
    remote = storage_paths.is_remote(output)
    spec = storage_paths.load_remote_spec(output) if remote else load_spec(output)
    return ConversionReport(
        output=output,
        spec=spec,
        seconds=seconds,
        runner=runner.description,
        rejected=list(spec.provenance.get("rejected", [])),
    )
