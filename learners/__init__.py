"""Few-shot learners in PyTorch: backbones, episodic and non-episodic methods, training loop,
evaluation and reports (Meta-Dataset, transductive fine-tuning, FIX-ML and ATG papers).

One folder per step of the flow, each importing only the folders before it
(`tests/project/test_import_layers.py`): `feed/` (data in), `nn/` (building blocks), `optim/`,
`inference/` (adapting to an episode), `methods/` (the Learner interface, the registry, the
methods), `training/`, `evaluation/`, `reproduction/` (a paper's table in one command);
`train.py`, `evaluate.py`, `report.py` and `reproduce.py` on top are the `python -m` commands. The modules that moved into the folders in 0.2.0 keep their old import
path until 0.3.0 (`import learners.registry` is `learners.methods.registry`, with a
DeprecationWarning naming the new path; `episodes.util.moved_modules`).

The learners' user faults derive from the toolkit's one root, `UserError`, as every package's
do (`episodes.util.cli_errors`): `LearnerConfigError` for an option or a combination of
options a run cannot take, `LearnerInputError` for an input path that is not there or not what
the option expects. A plain ValueError raised in learners is a bug and keeps its traceback.
"""

from __future__ import annotations

from episodes.util.cli_errors import UserError
from episodes.util.moved_modules import install as _install_moved_modules

__all__ = ["MOVED", "LearnerConfigError", "LearnerInputError"]


class LearnerConfigError(UserError, ValueError):
    """A learners option (flag, recipe or config value) or a combination of them that a run
    cannot take; the message names the flag and the value."""


class LearnerInputError(UserError, FileNotFoundError):
    """An input a learners command reads (a run folder, dataset, split file, checkpoint,
    evaluation folder) that is missing or not what the option expects; the message names it."""


_ROOMS = {
    "evaluation": (
        "batched_inference",
        "batched_memory",
        "episode_eval",
        "evaluation_folder",
        "hardness_model",
        "metrics",
        "sharded_evaluation",
    ),
    "feed": (
        "batched_episodes",
        "device_prefetch",
        "episode_batch",
        "episode_feed",
        "episode_source",
        "synthetic_episodes",
        "validation_dataset",
    ),
    "inference": (
        "batched_finetune",
        "batched_maml",
        "finetune",
        "finetune_augment",
        "knn",
        "md_finetune",
    ),
    "methods": ("config_fields", "config_flags", "learner", "learner_config", "registry"),
    "nn": (
        "backbones",
        "batch_norm",
        "batched_batch_norm",
        "inner_loop",
        "pretrain_head",
        "prototypes",
    ),
    "optim": ("lr_schedule", "mixed_precision", "weight_decay"),
    "training": (
        "backbone_init",
        "checkpoint_file",
        "device",
        "distributed",
        "meta_batch",
        "recipe_files",
        "run_checkpoints",
        "run_dir",
        "training_loop",
    ),
}
# old dotted name -> new (issue 31, version 0.2.0; git log --diff-filter=R: pure moves)
MOVED: dict[str, str] = {
    f"learners.{name}": f"learners.{room}.{name}"
    for room, names in _ROOMS.items()
    for name in names
}

_install_moved_modules(MOVED)
