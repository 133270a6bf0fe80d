"""Evaluate a learner on episodes: per-episode records (ways, shots, accuracy, hardness) and
per-class records (shots, precision, recall), plus the validation hook of the training loop."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from learners import LearnerConfigError
from learners.evaluation.batched_inference import batched_query_logits
from learners.evaluation.metrics import (
    AccuracySummary,
    class_precision,
    episode_hardness,
    summarize_accuracies,
)
from learners.feed.batched_episodes import size_buckets
from learners.feed.episode_batch import EpisodeTensors
from learners.methods.learner import Learner
from learners.optim.mixed_precision import MixedPrecision

__all__ = [
    "batch_logits",
    "CLASS_FIELDS",
    "EPISODE_FIELDS",
    "episode_generator",
    "episode_records",
    "EpisodeRecord",
    "evaluate_episode",
    "evaluate_episodes",
    "HardnessMeasure",
    "validation_hook",
]

EPISODE_FIELDS = (
    "episode",
    "source",
    "ways",
    "support_size",
    "query_size",
    "mean_shots",
    "min_shots",
    "max_shots",
    "accuracy",
    "hardness",
)
CLASS_FIELDS = ("episode", "source", "way", "class_id", "shots", "queries", "precision", "recall")


@dataclass(frozen=True)
class HardnessMeasure:
    """How Omega (Dhillon eq. 9) is measured: `extract` maps images (normalised NCHW tensor) to
    the extractor's outputs; `relu` applies (.)_+ before normalising (the paper does not)."""

    extract: Callable[[torch.Tensor], torch.Tensor]
    description: str
    relu: bool = False

    def header(self) -> str:
        """One line for the top of episodes.csv: what the hardness column measures."""
        relu = "with" if self.relu else "without"
        return f"hardness: Dhillon et al. eq. 9 {relu} ReLU; extractor: {self.description}"


@dataclass
class EpisodeRecord:
    episode: int
    source: str
    ways: int
    support_size: int
    query_size: int
    mean_shots: float
    min_shots: int
    max_shots: int
    accuracy: float
    hardness: float

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


def episode_generator(seed: int, index: int) -> torch.Generator:
    """The CPU generator of episode `index`'s random draws (fine-tuning augmentation): a
    function of (seed, index) only, so batching never changes an episode's draws."""
    state = np.random.SeedSequence([seed, index]).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


def episode_records(
    ep: EpisodeTensors, logits: torch.Tensor, index: int, hardness: HardnessMeasure | None = None
) -> tuple[EpisodeRecord, list[dict[str, Any]]]:
    """The episode's record (accuracy of the (Q, ways) `logits`, its hardness: NaN without an
    extractor) and its per-class precision/recall rows."""
    predictions = logits.argmax(dim=1).cpu().numpy()
    labels = ep.query_labels.cpu().numpy()
    shots = ep.shots
    omega = float("nan")
    if hardness is not None:
        with torch.no_grad():
            omega = episode_hardness(
                hardness.extract(ep.support_images),
                ep.support_labels,
                hardness.extract(ep.query_images),
                ep.query_labels,
                ep.ways,
                relu=hardness.relu,
            )
    record = EpisodeRecord(
        episode=index,
        source=ep.source,
        ways=ep.ways,
        support_size=int(len(ep.support_labels)),
        query_size=int(len(labels)),
        mean_shots=float(shots.mean()),
        min_shots=int(shots.min()),
        max_shots=int(shots.max()),
        accuracy=float((predictions == labels).mean()),
        hardness=omega,
    )
    precision = class_precision(predictions, labels, ep.ways)
    queries = np.bincount(labels, minlength=ep.ways)
    hits = np.bincount(labels[predictions == labels], minlength=ep.ways)
    class_ids = np.zeros(ep.ways, dtype=np.int64)
    class_ids[ep.support_labels.cpu().numpy()] = ep.support_class_ids
    rows = [
        {
            "episode": index,
            "source": ep.source,
            "way": way,
            "class_id": int(class_ids[way]),
            "shots": int(shots[way]),
            "queries": int(queries[way]),
            "precision": float(precision[way]),
            "recall": float(hits[way] / queries[way]) if queries[way] else float("nan"),
        }
        for way in range(ep.ways)
    ]
    return record, rows


def evaluate_episode(
    learner: Learner, episode: Any, index: int, hardness: HardnessMeasure | None = None
) -> tuple[EpisodeRecord, list[dict[str, Any]]]:
    """Accuracy of `learner` on one episode, its hardness (NaN without an extractor) and the
    per-class precision/recall rows."""
    ep = learner.to_tensors(episode)
    return episode_records(ep, learner.predict(ep), index, hardness)


def _is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error)


def batch_logits(
    learner: Learner,
    episodes: Sequence[EpisodeTensors],
    generators: Sequence[torch.Generator],
    autocast: Callable[[], AbstractContextManager[Any]],
    stacking: str = "auto",
) -> list[torch.Tensor]:
    """`batched_query_logits`, halving the batch while the device runs out of memory (results
    do not depend on the batch size, so halving changes no number)."""
    states = [generator.get_state() for generator in generators]
    try:
        return batched_query_logits(learner, episodes, generators, autocast, stacking)
    except (torch.OutOfMemoryError, RuntimeError) as error:
        if len(episodes) == 1 or not _is_out_of_memory(error):
            raise
    for generator, state in zip(generators, states):  # the retry draws what this try drew
        generator.set_state(state)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    half = len(episodes) // 2
    first = batch_logits(learner, episodes[:half], generators[:half], autocast, stacking)
    return first + batch_logits(learner, episodes[half:], generators[half:], autocast, stacking)


def evaluate_episodes(
    learner: Learner,
    episodes: Iterable[Any],
    count: int,
    hardness: HardnessMeasure | None = None,
    progress: bool = True,
    description: str = "evaluate",
    episodes_per_batch: int = 1,
    seed: int = 0,
    amp: str = "off",
    stacking: str = "auto",
    indices: Sequence[int] | None = None,
) -> tuple[list[EpisodeRecord], list[dict[str, Any]]]:
    """Evaluate the first `count` episodes, `episodes_per_batch` at a time (`amp`: autocast as
    the run trained; `stacking`: see `learners.inference.batched_finetune.resolved_stacking`); fails
    clearly if the source has fewer. Episode i's random draws come from
    `episode_generator(seed, i)` whatever the batch size. `indices` names the episodes' indices
    in their stream when `episodes` is a share of it (a torchrun rank's; default 0, 1, ...)."""
    if episodes_per_batch < 1:
        raise LearnerConfigError(f"--episodes-per-batch {episodes_per_batch}: expected >= 1")
    records: list[EpisodeRecord] = []
    class_rows: list[dict[str, Any]] = []
    autocast = MixedPrecision(amp, learner.device.type).autocast
    bar = tqdm(
        total=count, disable=not progress, desc=description, unit="episode", dynamic_ncols=True
    )
    numbers = range(count) if indices is None else indices
    source = zip(numbers, itertools.islice(episodes, count))
    try:
        while chunk := list(itertools.islice(source, episodes_per_batch)):
            tensors = [learner.to_tensors(episode) for _, episode in chunk]
            generators = [episode_generator(seed, index) for index, _ in chunk]
            logits: list[torch.Tensor] = [torch.empty(0)] * len(chunk)
            sizes = [len(ep.support_labels) + len(ep.query_labels) for ep in tensors]
            for bucket in size_buckets(sizes):  # similar sizes together: less padding
                values = batch_logits(
                    learner,
                    [tensors[i] for i in bucket],
                    [generators[i] for i in bucket],
                    autocast,
                    stacking,
                )
                for position, value in zip(bucket, values):
                    logits[position] = value
            for (index, _), ep, values in zip(chunk, tensors, logits):
                record, rows = episode_records(ep, values, index, hardness)
                records.append(record)
                class_rows.extend(rows)
            bar.update(len(chunk))
            bar.set_postfix(acc=f"{np.mean([r.accuracy for r in records]):.4f}")
    finally:
        bar.close()
    if len(records) < count:
        raise ValueError(f"episode source ended after {len(records)} of {count} episodes")
    return records, class_rows


def validation_hook(
    episodes_factory: Callable[[], Iterable[Any]], count: int
) -> Callable[[Learner], AccuracySummary]:
    """A training-loop hook: mean accuracy on the same `count` validation episodes each time."""

    def validate(learner: Learner) -> AccuracySummary:
        records, _ = evaluate_episodes(learner, episodes_factory(), count, progress=False)
        return summarize_accuracies([r.accuracy for r in records])

    return validate
