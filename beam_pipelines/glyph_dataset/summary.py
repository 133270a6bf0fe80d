"""What `generate` wrote (or found already written), read back from its GENERATOR.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from beam_pipelines.glyph_dataset.config import (
    BACKGROUND,
    EVALUATION,
    OMNIGLOT_DRAWERS,
    OMNIGLOT_SIZE,
)

__all__ = ["GlyphDatasetSummary", "summary_from_manifest"]


@dataclass(frozen=True)
class GlyphDatasetSummary:
    """What `generate` wrote (or found already written)."""

    output_dir: Path
    background: dict[str, int]  # alphabet name -> number of characters
    evaluation: dict[str, int]
    images: int
    seconds: float
    cached: bool
    as_zip: bool = False
    seed: int = 0
    size: int = OMNIGLOT_SIZE
    examples: int = OMNIGLOT_DRAWERS
    files: tuple[str, ...] = field(default=())

    @property
    def characters(self) -> int:
        return sum(self.background.values()) + sum(self.evaluation.values())

    def describe(self) -> str:
        """One paragraph for the CLI."""
        what = "zip archives" if self.as_zip else "folders"
        head = (
            "Up to date (same parameters, nothing regenerated; --overwrite forces): "
            if self.cached
            else f"Generated in {self.seconds:.1f} s: "
        )
        return (
            f"{head}{len(self.background)} background + {len(self.evaluation)} evaluation "
            f"alphabets, {self.characters} characters, {self.images} images "
            f"({self.examples} drawers, {self.size}x{self.size}, seed {self.seed}) "
            f"in Omniglot layout ({what}) at {self.output_dir}."
        )


def summary_from_manifest(
    output_dir: Path, manifest: dict, seconds: float, cached: bool
) -> GlyphDatasetSummary:
    """The summary of a folder whose GENERATOR.json is `manifest` (written now or found)."""
    params = manifest["params"]
    sizes: dict[str, dict[str, int]] = {BACKGROUND: {}, EVALUATION: {}}
    for alphabet in manifest["alphabets"]:
        sizes[alphabet["split"]][alphabet["name"]] = len(alphabet["characters"])
    return GlyphDatasetSummary(
        output_dir=output_dir,
        background=sizes[BACKGROUND],
        evaluation=sizes[EVALUATION],
        images=int(manifest["counts"]["images"]),
        seconds=seconds,
        cached=cached,
        as_zip=bool(params["as_zip"]),
        seed=int(params["seed"]),
        size=int(params["size"]),
        examples=int(params["examples"]),
        files=tuple(manifest.get("files", ())),
    )
