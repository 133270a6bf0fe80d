"""The check before any work: write afresh, replace our own stale output, or reuse it as is."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from beam_pipelines.glyph_dataset.config import (
    BACKGROUND,
    EVALUATION,
    GlyphDatasetConfig,
    GlyphDatasetError,
)
from beam_pipelines.glyph_dataset.manifest import (
    GENERATOR_NAME,
    GENERATOR_VERSION,
    MANIFEST_NAME,
    environment_fingerprint,
    read_manifest,
)

__all__ = ["check_output", "count_images"]


def count_images(output_dir: Path, manifest: dict) -> int:
    """PNG files present in the output (in its folders or zips); -1 for an unreadable zip."""
    if manifest["params"]["as_zip"]:
        total = 0
        for split in (BACKGROUND, EVALUATION):
            try:
                with zipfile.ZipFile(output_dir / f"{split}.zip") as archive:
                    total += sum(name.endswith(".png") for name in archive.namelist())
            except (OSError, zipfile.BadZipFile):
                return -1
        return total
    return sum(
        1
        for split in (BACKGROUND, EVALUATION)
        for _, _, files in os.walk(output_dir / split)
        for name in files
        if name.endswith(".png")
    )


def check_output(
    output_dir: Path, config: GlyphDatasetConfig, overwrite: bool
) -> tuple[str, dict | None]:
    """Decide before any work: 'fresh', 'replace' or 'cached' (with the manifest found).

    Raises GlyphDatasetError for a path that is not a folder or for a non-empty folder holding
    something else than this exact dataset, unless `overwrite`.
    """
    if not output_dir.exists():
        return "fresh", None
    if not output_dir.is_dir():
        raise GlyphDatasetError(f"output path {output_dir} exists and is not a folder")
    if not any(output_dir.iterdir()):
        return "fresh", None
    manifest = read_manifest(output_dir)
    ours = manifest is not None and manifest.get("generator") == GENERATOR_NAME
    if ours and manifest.get("params") == config.params():
        same_build = (
            manifest.get("version") == GENERATOR_VERSION
            and manifest.get("environment") == environment_fingerprint()
        )
        if (
            not overwrite
            and same_build
            and count_images(output_dir, manifest) == int(manifest["counts"]["images"])
        ):
            return "cached", manifest
        return "replace", manifest  # our own output, same parameters: stale or incomplete
    if overwrite:
        return "replace", manifest
    if ours:
        old = manifest.get("params", {})
        changed = ", ".join(
            f"{key}={old.get(key)!r}->{value!r}"
            for key, value in config.params().items()
            if old.get(key) != value
        )
        raise GlyphDatasetError(
            f"output folder {output_dir} holds a glyph dataset generated with other parameters "
            f"({changed}); pass --overwrite to replace it or choose another --output"
        )
    raise GlyphDatasetError(
        f"output folder {output_dir} exists, is not empty and was not written by this "
        f"generator (no {MANIFEST_NAME}); pass --overwrite to replace it or choose another --output"
    )
