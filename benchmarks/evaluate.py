"""Episodes per second of `learners.evaluate`'s loop: one at a time vs batched (issue 22).

    python -m benchmarks.evaluate [--episodes 8] [--episodes-per-batch 8] [--rounds 2]
    python -m benchmarks.evaluate --device cuda --backbone resnet12 --image-size 84 \
        --episodes 200 --episodes-per-batch 32 --amp bf16
    python -m benchmarks.evaluate --device cuda --backbone resnet12 --variable --query 10 \
        --episodes 32 --episodes-per-batch 16 --rounds 1   # Meta-Dataset-sized episodes

A multiclass learner (random weights: speed does not depend on them) evaluates the same
synthetic episodes (5-way 1-shot 15-query by default) with transductive fine-tuning (Dhillon et
al.: 25 epochs, two Adam steps each) through `learners.evaluation.episode_eval.evaluate_episodes`, once
with --episodes-per-batch 1 (today's loop) and once batched; modes alternate for --rounds rounds
(the machine may be shared) and the best round of each is compared. Printed: episodes/s of both
and their ratio, measured in this run, and the share of query predictions on which they agree.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path and its episodes.py would shadow the
# `episodes` package: drop it, and put the repository root there instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(_HERE.parent) not in sys.path:
    sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from learners.evaluation.episode_eval import evaluate_episodes  # noqa: E402
from learners.feed.synthetic_episodes import (  # noqa: E402
    BlobDataset,
    BlobDatasetConfig,
    SyntheticEpisodeConfig,
    SyntheticEpisodeSource,
)
from learners.methods.registry import build_learner, learner_config  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchmarks.evaluate", description=__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backbone", default="cnn4")
    parser.add_argument("--width", type=float, default=1.0)
    parser.add_argument("--image-size", type=int, default=84)
    parser.add_argument("--inference", default="transductive", choices=("transductive", "finetune"))
    parser.add_argument("--epochs", type=int, default=25, help="fine-tuning epochs")
    parser.add_argument("--ways", type=int, default=5)
    parser.add_argument("--shots", type=int, default=1)
    parser.add_argument("--query", type=int, default=15)
    parser.add_argument(
        "--variable",
        action="store_true",
        help="Meta-Dataset-like variable episodes: 5..--max-ways ways, 1..--max-shots shots "
        "each (up to 500 support images by default), --query queries per way",
    )
    parser.add_argument("--max-ways", type=int, default=50)
    parser.add_argument("--max-shots", type=int, default=10)
    parser.add_argument("--episodes", type=int, default=8, help="episodes per mode and round")
    parser.add_argument("--episodes-per-batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--stacking",
        default="auto",
        choices=("auto", "vmap", "loop"),
        help="how per-episode copies run (auto: vmap on GPUs, loop on the CPU)",
    )
    parser.add_argument("--amp", default="off", choices=("off", "bf16", "fp16"))
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--json", default=None, help="also write the numbers to this file")
    return parser


def run(args: argparse.Namespace) -> dict[str, float]:
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = learner_config(
        args.inference,
        backbone=args.backbone,
        width=args.width,
        image_size=args.image_size,
        finetune_epochs=args.epochs,
        train_class_ids=list(range(64)),
    )
    learner = build_learner(config).to(args.device)
    if args.variable:
        episodes = SyntheticEpisodeConfig(
            ways=None,
            shots=None,
            queries=args.query,
            max_ways=args.max_ways,
            max_shots=args.max_shots,
        )
    else:
        episodes = SyntheticEpisodeConfig(ways=args.ways, shots=args.shots, queries=args.query)
    classes = max(8, args.max_ways if args.variable else args.ways)
    data = BlobDataset(BlobDatasetConfig(image_size=args.image_size, test_classes=classes))
    source = SyntheticEpisodeSource("test", seed=0, config=episodes, dataset=data)
    tensors = [learner.to_tensors(source.episode(i)) for i in range(args.episodes)]
    rates: dict[int, list[float]] = {1: [], args.episodes_per_batch: []}
    accuracies: dict[int, list[float]] = {}
    for round_index in range(args.rounds):
        for per_batch in rates:
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
            records, _ = evaluate_episodes(
                learner,
                tensors,
                len(tensors),
                progress=False,
                episodes_per_batch=per_batch,
                amp=args.amp,
                stacking=args.stacking,
            )
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            rate = len(tensors) / (time.perf_counter() - start)
            rates[per_batch].append(rate)
            accuracies[per_batch] = [r.accuracy for r in records]
            print(f"round {round_index + 1}: B={per_batch}: {rate:.3f} episodes/s", flush=True)
    one, batched = max(rates[1]), max(rates[args.episodes_per_batch])
    same = sum(
        abs(a - b) < 1e-9 for a, b in zip(accuracies[1], accuracies[args.episodes_per_batch])
    )
    result = {
        "device": args.device,
        "one_at_a_time_episodes_per_s": one,
        "batched_episodes_per_s": batched,
        "episodes_per_batch": args.episodes_per_batch,
        "stacking": args.stacking,
        "ratio": batched / one,
        "episodes_with_equal_accuracy": same / len(tensors),
    }
    shape = (
        f"variable (5..{args.max_ways}-way, 1..{args.max_shots}-shot)"
        if args.variable
        else f"{args.ways}-way {args.shots}-shot"
    )
    print(
        f"{args.backbone} {args.inference} {shape} {args.query}-query "
        f"{args.image_size}px, {args.epochs} epochs, {args.device}, torch threads "
        f"{torch.get_num_threads()}, stacking {args.stacking}: "
        f"one at a time {one:.3f} episodes/s, "
        f"B={args.episodes_per_batch} {batched:.3f} episodes/s, ratio {batched / one:.2f}x; "
        f"equal episode accuracies {same}/{len(tensors)}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    run(build_parser().parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
