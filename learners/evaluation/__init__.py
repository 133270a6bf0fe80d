"""Scoring learners on episodes: per-episode and batched evaluation, metrics, hardness, results."""

__all__ = [
    "batched_inference",
    "batched_memory",
    "episode_eval",
    "evaluation_folder",
    "hardness_model",
    "held_out_validation",
    "metrics",
    "sharded_evaluation",
]
