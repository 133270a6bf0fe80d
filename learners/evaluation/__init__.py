"""Scoring learners on episodes: per-episode and batched evaluation, metrics, hardness, results."""
