"""Evaluation episodes shared by the ranks of a torchrun start: rank r of W evaluates episodes
r, r+W, r+2W, ... and every rank gets all records back in episode order, so rank 0 writes the
same files one process writes.

Each episode of a sharded evaluation is evaluated under torch's generator seeded by (seed,
episode), so inferences that draw random numbers (fine-tuning's augmentation) give the same
numbers for any W >= 2; inferences that draw none (prototypes, k-NN, MAML, support-based
initialisation) give exactly the records of one process. One process is unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from tqdm import tqdm

from learners.distributed import RankInfo, evaluation_share, gather_objects
from learners.episode_eval import (
    EpisodeRecord,
    HardnessMeasure,
    evaluate_episode,
    evaluate_episodes,
)
from learners.learner import Learner
from learners.meta_batch import item_seed


def evaluate_shard(
    learner: Learner,
    source: Any,
    count: int,
    ranks: RankInfo,
    seed: int,
    hardness: HardnessMeasure | None = None,
    progress: bool = True,
    description: str = "evaluate",
) -> tuple[list[EpisodeRecord], list[dict[str, Any]]]:
    """Records of episodes 0..count-1 of `source` (all ranks' shares, in episode order); one
    process evaluates them all, as `evaluate_episodes`."""
    if not ranks.sharded:
        return evaluate_episodes(
            learner, source.episodes(0), count, hardness, progress, description
        )
    indices = evaluation_share(count, ranks)
    records: list[EpisodeRecord] = []
    class_rows: list[dict[str, Any]] = []
    bar = tqdm(
        total=count,
        disable=not (progress and ranks.is_writer),
        desc=f"{description} (rank 0 of {ranks.world_size})",
        unit="episode",
        dynamic_ncols=True,
    )
    try:
        for index, episode in zip(indices, source.items(indices)):
            torch.manual_seed(item_seed(seed, index))
            record, rows = evaluate_episode(learner, episode, index, hardness)
            records.append(record)
            class_rows.extend(rows)
            bar.update(ranks.world_size)
    finally:
        bar.close()
    if len(records) < len(indices):
        raise ValueError(
            f"episode source ended before episode {indices[len(records)]} of {count} episodes"
        )
    shares = gather_objects((records, class_rows), ranks)
    all_records = sorted((r for share, _ in shares for r in share), key=lambda r: r.episode)
    all_rows = sorted(
        (row for _, rows in shares for row in rows), key=lambda row: (row["episode"], row["way"])
    )
    return all_records, all_rows
