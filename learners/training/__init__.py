"""The training loop and what it needs: run folders, checkpoints, torchrun ranks, recipes."""
