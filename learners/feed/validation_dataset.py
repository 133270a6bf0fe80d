"""Which dataset's valid split validates a training run (`learners.train --validation-dataset`).

By default every `--dataset`'s valid split validates, as before. Meta-Dataset validated on
ILSVRC's valid split only, also when training on all datasets (paper sec. 5 "Validation" and
the appendix "The choice of a meta-validation procedure"; `gin/setups/all_datasets.gin`:
`benchmark.eval_datasets = 'ilsvrc_2012'`; in `trainer.py` only the eval datasets contribute
to the valid split), which its recipes reproduce with `--validation-dataset ilsvrc_2012`.
"""

from __future__ import annotations

from pathlib import Path

from episodes.records.dataset_spec import load_spec
from learners import LearnerConfigError

__all__ = ["dataset_name", "EVERY_DATASET", "RECORD_KEY", "resolve_validation_dataset"]

EVERY_DATASET = "all"
RECORD_KEY = "validation_dataset"  # config.json `extra` key, written only when not the default


def dataset_name(folder: str) -> str:
    """The name a converted dataset folder goes by: its spec's name (the folder's name when
    the spec cannot be read; opening the dataset reports that)."""
    try:
        return load_spec(folder).name
    except (ValueError, OSError):
        return Path(folder).name


def resolve_validation_dataset(choice: str | None, dataset: str, synthetic: str) -> str | None:
    """The folder whose valid split validates, for `--validation-dataset choice` and the run's
    `dataset` (folders joined by commas, or `synthetic`): None for every training dataset (no
    choice, or 'all'); the folder of the training dataset named `choice` (spec or folder name);
    else `choice` itself when it is a folder. ValueError in one line otherwise."""
    if choice is None or choice == EVERY_DATASET:
        return None
    flag = f"--validation-dataset {choice}"
    if dataset == synthetic:
        raise LearnerConfigError(
            f"{flag}: the synthetic data has one valid split; pass --validation-dataset "
            f"{EVERY_DATASET} (or leave it out) to validate on it"
        )
    folders = [d for d in dataset.split(",") if d]
    names = {folder: dataset_name(folder) for folder in folders}
    named = [f for f in folders if choice in (names[f], Path(f).name)]
    if len(named) > 1:
        raise LearnerConfigError(
            f"{flag}: several --dataset folders go by that name ({named}); pass one"
        )
    if named:
        return named[0]
    if Path(choice).is_dir():
        return choice
    listed = ", ".join(f"{names[f]} ({f})" for f in folders)
    raise LearnerConfigError(
        f"{flag}: no --dataset goes by that name and no such folder; expected one of the "
        f"datasets' names [{listed}], a converted dataset folder, or {EVERY_DATASET} (every "
        f"--dataset's valid split)"
    )
