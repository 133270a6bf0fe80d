"""The training loop and what it needs: run folders, checkpoints, torchrun ranks, recipes."""

__all__ = [
    "backbone_init",
    "checkpoint_file",
    "device",
    "distributed",
    "loss_watch",
    "meta_batch",
    "recipe_files",
    "run_checkpoints",
    "run_dir",
    "run_length",
    "training_loop",
    "validation_choice",
]
