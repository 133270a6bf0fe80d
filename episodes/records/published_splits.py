"""The published class splits shipped with the toolkit (`published/`), found by name.

Names are '<group>/<file stem>', e.g. 'meta_dataset/ilsvrc_2012' (Meta-Dataset's lists, which
the converters use by default), 'atg/lfw10_D0.96' (the ATG paper's tables), 'fc100/cifar100'.
They live here, below every package that reads them: the converters (`beam_pipelines.sources`)
and the split commands (`python -m splits.published list | show`, `splits make --method
published`) both stand on `episodes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from episodes.records.index_conventions import convention_class_names
from episodes.records.split_file import SplitFile, SplitFileError

__all__ = ["PUBLISHED_DIR", "list_published", "load_published"]

PUBLISHED_DIR = Path(__file__).resolve().parent / "published"


def list_published() -> list[str]:
    """All shipped split names, sorted."""
    return sorted(
        p.relative_to(PUBLISHED_DIR).with_suffix("").as_posix()
        for p in PUBLISHED_DIR.rglob("*.json")
    )


def load_published(name: str, class_names: Sequence[str] | None = None) -> SplitFile:
    """Load a shipped split; index-only tables get names from `class_names` or their convention.

    Without `class_names`, tables whose convention has no offline name list (LFW10, mini- and
    tiered-ImageNet) are returned with indices only.
    """
    path = PUBLISHED_DIR / f"{name}.json"
    if not path.is_file():
        known = ", ".join(list_published()[:8])
        raise SplitFileError(f"no published split {name!r} (e.g. {known}, ...)")
    split = SplitFile.load(path)
    if split.class_indices is None or split.has_names():
        return split
    names = list(class_names) if class_names is not None else None
    if names is None and split.index_convention:
        names = convention_class_names(split.index_convention)
    return split.with_class_names(names) if names is not None else split
