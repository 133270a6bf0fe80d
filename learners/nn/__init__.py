"""Building blocks of the networks: backbones, BatchNorm conventions, prototypes, heads."""

__all__ = [
    "backbones",
    "batch_norm",
    "batched_batch_norm",
    "inner_loop",
    "linear_classifier",
    "pretrain_head",
    "prototypes",
]
