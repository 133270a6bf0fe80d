"""What episodes are drawn from: a converted dataset's spec (its splits optionally replaced by a
split file) and the sampler built over one or several specs (Meta-Dataset's, or FIX-ML's
base/novel mixture).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from episodes.records.dataset_spec import DatasetSpec, Split, load_spec
from episodes.records.local_dataset import require_local_dataset
from episodes.records.reader_errors import ReaderError


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
) -> Any:
    """The sampler of `episodes.sampling.sampler` for one dataset or several (uniform over sources);
    with `mix_lambda`, FIX-ML's tau_BN(lambda) mixing base classes of `base_split` with novel
    classes of `split` (episodes.sampling.fixml.MixedSampler, fixed 5-way 5-shot 15-query by default)."""
    from episodes.sampling import sampler as sampler_module  # lazily: the reader works without it

    if mix_lambda is not None:
        from episodes.sampling.fixml import MixedSampler

        if len(specs) != 1:
            raise ReaderError("lambda mixing (base/novel) applies to one dataset at a time")
        if config is None:
            config = sampler_module.SamplerConfig.fixed()
        return MixedSampler(specs[0], base_split, split, mix_lambda, config, seed)
    if config is None:
        config = sampler_module.SamplerConfig()
    if len(specs) == 1:
        return sampler_module.EpisodeSampler(specs[0], split, config, seed)
    return sampler_module.MultiSourceSampler(list(specs), split, config, seed)
