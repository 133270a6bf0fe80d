"""What episodes are drawn from: a converted dataset's spec (its splits optionally replaced by a
split file) and the sampler a sampling mode builds over one or several specs (Meta-Dataset's,
or FIX-ML's base/novel mixture: `episodes.sampling.modes`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from episodes.records.dataset_spec import DatasetSpec, Split, load_spec
from episodes.records.local_dataset import require_local_dataset
from episodes.records.reader_errors import ReaderError
from episodes.sampling.sampling_mode import SamplingMode

__all__ = ["legacy_mode", "load_dataset", "make_sampler", "read_split_file", "split_file_notes"]


def read_split_file(path: str | os.PathLike) -> tuple[list[str], list[str], list[str]]:
    """Train / valid / test class-name lists of a split file (`episodes.records.split_file`'s parser)."""
    from episodes.records.split_file import SplitFileError
    from episodes.records.split_file import read_split_file as parse_split_file

    try:
        split = parse_split_file(path).named()
    except SplitFileError as exc:
        raise ReaderError(str(exc)) from exc
    return split.train, split.valid, split.test


def load_dataset(
    dataset_dir: str | os.PathLike, split_file: str | os.PathLike | None = None
) -> DatasetSpec:
    """The spec of a converted dataset folder, with its splits replaced by a split file."""
    require_local_dataset(dataset_dir)  # a URL or an unfinished folder: one line saying what to do
    spec = load_spec(dataset_dir)
    if split_file is not None:
        train, valid, test = read_split_file(split_file)
        spec = spec.with_splits(train, valid, test, source=str(split_file))
    return spec


def split_file_notes(datasets: Sequence[str], split_file: str | os.PathLike | None) -> list[str]:
    """The one-line notes of where `split_file` leaves a dataset's hierarchy out (commands
    print them as `note:` lines before sampling starts)."""
    if split_file is None:
        return []
    notes = []
    for folder in datasets:
        note = load_dataset(folder, split_file).hierarchy_note
        if note:
            notes.append(note)
    return notes


def make_sampler(
    specs: Sequence[DatasetSpec],
    split: Split,
    config: Any,
    seed: int,
    mix_lambda: float | None = None,
    base_split: Split | str = Split.TRAIN,
    *,
    sampling: SamplingMode | None = None,
) -> Any:
    """The sampler of a sampling mode (`episodes.sampling.modes`) for one dataset or several:
    `sampling`, else FIX-ML's base/novel mixture when `mix_lambda` is given (the older
    spelling of `get_mode("mixed", lam=mix_lambda, base_split=base_split)`), else Meta-Dataset's
    sampler (uniform over sources). A config of None is the mode's default."""
    mode = sampling if sampling is not None else legacy_mode(mix_lambda, base_split)
    return mode.sampler(
        specs, Split.parse(split), mode.default_config() if config is None else config, seed
    )


def legacy_mode(mix_lambda: float | None, base_split: Split | str = Split.TRAIN) -> SamplingMode:
    """The mode the `mix_lambda` / `base_split` arguments (reader, remote source) ask for."""
    from episodes.sampling.modes import get_mode

    if mix_lambda is None:
        return get_mode()
    base = base_split.value if isinstance(base_split, Split) else base_split
    return get_mode("mixed", lam=mix_lambda, base_split=base)
