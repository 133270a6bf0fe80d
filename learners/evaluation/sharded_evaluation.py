"""Evaluation episodes shared by the ranks of a torchrun start: one process evaluates
episodes in batches of B consecutive ones (0..B-1, B..2B-1, ...); rank r of W evaluates batches
r, r+W, r+2W, ... of those, and every rank gets all records back in episode order, so rank 0
writes the files one process writes with the same --episodes-per-batch.

Episode i's random draws (fine-tuning's augmentation) come from the generator of (seed, i)
whatever the rank (`learners.evaluation.episode_eval.evaluate_episodes`). Whole batches, not episodes, are
shared because a batch's make-up reaches the float bits: its size buckets and their padding, and
a lone episode's one-at-a-time path, round differently (logits ~1e-6 apart); with every batch
the one of one process, the records are equal byte for byte.
"""

from __future__ import annotations

from typing import Any

from learners import LearnerConfigError
from learners.evaluation.episode_eval import (
    EpisodeRecord,
    HardnessMeasure,
    evaluate_episodes,
)
from learners.methods.learner import Learner
from learners.training.distributed import RankInfo, gather_objects

__all__ = ["batch_share", "evaluate_shard"]


def evaluate_shard(
    learner: Learner,
    source: Any,
    count: int,
    ranks: RankInfo,
    seed: int,
    hardness: HardnessMeasure | None = None,
    progress: bool = True,
    description: str = "evaluate",
    **batching: Any,
) -> tuple[list[EpisodeRecord], list[dict[str, Any]]]:
    """Records of episodes 0..count-1 of `source` (all ranks' shares, in episode order); one
    process evaluates them all, as `evaluate_episodes` (`batching`: its episodes_per_batch and
    amp)."""
    if not ranks.sharded:
        return evaluate_episodes(
            learner,
            source.episodes(0),
            count,
            hardness,
            progress,
            description,
            seed=seed,
            **batching,
        )
    indices = batch_share(count, batching.get("episodes_per_batch", 1), ranks)
    records, class_rows = evaluate_episodes(
        learner,
        source.items(indices),
        len(indices),
        hardness,
        progress and ranks.is_writer,
        f"{description} (rank 0 of {ranks.world_size})",
        seed=seed,
        indices=indices,
        **batching,
    )
    shares = gather_objects((records, class_rows), ranks)
    all_records = sorted((r for share, _ in shares for r in share), key=lambda r: r.episode)
    all_rows = sorted(
        (row for _, rows in shares for row in rows), key=lambda row: (row["episode"], row["way"])
    )
    return all_records, all_rows


def batch_share(count: int, per_batch: int, ranks: RankInfo) -> list[int]:
    """Rank r's episodes: batches r, r+W, r+2W, ... of the batches of `per_batch` consecutive
    episodes one process evaluates, so that rank's own batches of `per_batch` are exactly
    those (only the run's last batch may be short, and it is last in its rank's list)."""
    if per_batch < 1:
        raise LearnerConfigError(f"--episodes-per-batch {per_batch}: expected >= 1")
    starts = range(ranks.rank * per_batch, count, ranks.world_size * per_batch)
    return [i for start in starts for i in range(start, min(start + per_batch, count))]
