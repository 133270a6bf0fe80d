"""Episode-description throughput of the sampler, against baselines measured in the same run.

    python -m benchmarks.sampler [--episodes 20000] [--specs DIR]

Scenarios: Meta-Dataset variable ways/shots on ILSVRC-2012 train (DAG sampling), fixed 5-way
5-shot 15-query on ILSVRC-2012 train, variable on Omniglot train (alphabets). Baselines: the
cost of one numpy random permutation of the split's classes per episode (a floor no sampler
can beat by much), and a straightforward per-class sampler (Generator per episode, one
Generator.choice per class) producing the same episode shapes.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from episodes.records.dataset_spec import Split, load_spec
from episodes.sampling.sampler import EpisodeSampler, SamplerConfig

DEFAULT_SPECS = (
    Path(__file__).resolve().parents[1].parent
    / "shared"
    / "reference-data"
    / "meta-dataset"
    / "dataset_specs"
)


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def time_sampler(sampler: EpisodeSampler, episodes: int, repeats: int) -> tuple[float, float]:
    """Best descriptions per wall-clock second and per CPU second of this process over
    `repeats` runs of `episodes` consecutive episodes (CPU time is robust to a busy machine)."""
    best_wall = best_cpu = 0.0
    for r in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(r * episodes, (r + 1) * episodes):
            sampler.episode(i)
        best_wall = max(best_wall, _rate(episodes, time.perf_counter() - wall))
        best_cpu = max(best_cpu, _rate(episodes, time.process_time() - cpu))
    return best_wall, best_cpu


def time_permutations(num_classes: int, episodes: int, repeats: int) -> float:
    """Permutations/s of range(num_classes) with one numpy Generator."""
    rng = np.random.default_rng(0)
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(episodes):
            rng.permutation(num_classes)
        best = max(best, _rate(episodes, time.perf_counter() - start))
    return best


def time_naive(sampler: EpisodeSampler, episodes: int, repeats: int) -> float:
    """Episodes/s of a per-class loop (Generator per episode, Generator.choice per class)
    drawing the same classes and shot/query counts as the sampler's first episodes."""
    shapes = []
    for d in sampler.descriptions(0, min(episodes, 500)):
        shapes.append(
            [
                (sampler.spec.images_per_class[c], len(s) + len(q))
                for c, s, q in zip(d.class_ids, d.support, d.query)
            ]
        )
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(episodes):
            rng = np.random.default_rng([0, i])
            for total, needed in shapes[i % len(shapes)]:
                picked = rng.choice(total, needed, replace=False)
                tuple(sorted(picked.tolist()))
        best = max(best, _rate(episodes, time.perf_counter() - start))
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--episodes", type=int, default=20000, help="episodes per timed run (default 20000)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed runs, best kept")
    parser.add_argument(
        "--specs",
        type=Path,
        default=DEFAULT_SPECS,
        help="folder with ilsvrc_2012_dataset_spec.json, omniglot_dataset_spec.json",
    )
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.repeats < 1:
        parser.error(f"--episodes={args.episodes} and --repeats={args.repeats} must be >= 1")
    for name in ("ilsvrc_2012", "omniglot"):
        if not (args.specs / f"{name}_dataset_spec.json").is_file():
            parser.error(f"{args.specs}: no {name}_dataset_spec.json")
    ilsvrc = load_spec(args.specs / "ilsvrc_2012_dataset_spec.json")
    omniglot = load_spec(args.specs / "omniglot_dataset_spec.json")
    scenarios = [
        ("ILSVRC train, variable (DAG)", ilsvrc, SamplerConfig()),
        ("ILSVRC train, 5-way 5-shot 15-query", ilsvrc, SamplerConfig.fixed()),
        ("Omniglot train, variable (alphabets)", omniglot, SamplerConfig()),
    ]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{args.episodes} episodes x {args.repeats} runs (best); load average {load:.2f}, "
        f"{os.cpu_count()} CPUs"
    )
    header = (
        f"{'scenario':40s}{'sampler/s':>11s}{'(cpu)/s':>10s}{'perm/s':>10s}"
        f"{'naive/s':>10s}{'vs perm':>9s}{'vs naive':>10s}"
    )
    print(header)
    for label, spec, config in scenarios:
        sampler = EpisodeSampler(spec, Split.TRAIN, config, seed=0)
        ours, ours_cpu = time_sampler(sampler, args.episodes, args.repeats)
        perm = time_permutations(len(spec.classes(Split.TRAIN)), args.episodes, args.repeats)
        naive = time_naive(sampler, max(1, args.episodes // 4), args.repeats)
        print(
            f"{label:40s}{ours:11.0f}{ours_cpu:10.0f}{perm:10.0f}{naive:10.0f}"
            f"{ours / perm:9.3f}{ours / naive:10.2f}"
        )


if __name__ == "__main__":
    main()
