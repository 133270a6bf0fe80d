"""Evaluation episodes shared by the ranks of a torchrun start: rank r of W evaluates episodes
r, r+W, r+2W, ... and every rank gets all records back in episode order, so rank 0 writes the
same files one process writes.

Episode i's random draws (fine-tuning's augmentation) come from the generator of (seed, i)
whatever the rank or the batch size (`learners.episode_eval.evaluate_episodes`), so a sharded
evaluation gives the records of one process.
"""

from __future__ import annotations

from typing import Any

from learners.distributed import RankInfo, evaluation_share, gather_objects
from learners.episode_eval import (
    EpisodeRecord,
    HardnessMeasure,
    evaluate_episodes,
)
from learners.learner import Learner


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
    indices = evaluation_share(count, ranks)
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
