"""`python -m learners.train`: train one method on episodes (or batches for multiclass).

Example:
  python -m learners.train --method protonet --backbone cnn4 --dataset OUT \
      --split-file S.json --episodes 20000 --device auto --output RUN

Re-running the same command on the same --output resumes from the last checkpoint; a larger
--episodes continues training. `--synthetic` trains on generated blob images. Every option of
the learners is a flag (generated from their config dataclasses); a method's own options are
refused for another method.
"""

from __future__ import annotations

import argparse
import functools
import shlex
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from episodes.util.cli_errors import run_main, user_faults
from episodes.util.cli_style import OLD_SPELLINGS_UNTIL, add_dataset_argument, command_parser
from learners.config_fields import cli_fields
from learners.config_flags import add_config_flags, given_values
from learners.device import choose_loading, make_deterministic, resolve_device
from learners.episode_eval import validation_hook
from learners.episode_feed import FeedConfig, check_throughput_options, feed
from learners.episode_source import (
    SYNTHETIC,
    EpisodeOptions,
    close_source,
    open_batch_source,
    open_episode_source,
)
from learners.learner_config import LearnerConfig
from learners.mixed_precision import AMP_MODES
from learners.registry import (
    build_learner,
    is_episodic,
    learner_config,
    method_names,
    method_option_classes,
    methods_sharing,
    resolved_config,
)
from learners.run_dir import RunConfig, write_or_check_run_config
from learners.training_loop import (
    CHECKPOINTS,
    LAST,
    LoopConfig,
    LoopResult,
    list_snapshots,
    run_training,
)


def add_episode_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("episodes (default: Meta-Dataset variable ways/shots)")
    group.add_argument("--ways", type=int, default=None, help="fixed ways")
    group.add_argument("--shots", type=int, default=None, help="fixed shots per class")
    group.add_argument("--query", type=int, default=None, help="fixed query examples per class")


def add_throughput_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "throughput (loading and storage options may change when a run resumes)"
    )
    group.add_argument(
        "--loader-workers",
        type=int,
        default=None,
        help="DataLoader processes reading episodes ahead (0: the training process reads; "
        "default: chosen from the device and cores, learners.device.choose_loading)",
    )
    group.add_argument(
        "--decode-processes",
        type=int,
        default=None,
        help="with --loader-workers 0: the reader decodes JPEG records ahead in N processes",
    )
    group.add_argument(
        "--keep-snapshots",
        type=int,
        default=None,
        help="keep only the N newest step snapshots (last.pt and best.pt are always kept)",
    )
    group.add_argument(
        "--amp",
        choices=AMP_MODES,
        default="off",
        help="mixed-precision training steps (bf16, or fp16 with loss scaling)",
    )
    group.add_argument(
        "--channels-last",
        action="store_true",
        help="NHWC weights and images (faster convolutions under --amp on GPUs)",
    )


def add_learner_flags(parser: argparse.ArgumentParser) -> None:
    """The shared learner options, then each method's own, generated from their dataclasses."""
    taken: set[str] = set()
    add_config_flags(
        parser.add_argument_group("learner (every method)"), LearnerConfig, taken=taken
    )
    for options in method_option_classes():
        names = ", ".join(methods_sharing(options))
        group = parser.add_argument_group(f"options of {names}")
        add_config_flags(group, options, taken=taken)


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("learners.train", __doc__)
    parser.add_argument("--method", required=True, help=f"one of {', '.join(method_names())}")
    data = parser.add_mutually_exclusive_group(required=True)
    add_dataset_argument(
        data,
        required=False,
        help="converted dataset folder (repeat --dataset to train on several)",
    )
    data.add_argument(
        "--synthetic",
        action="store_true",
        help="train on generated blob images (no data needed; for trying the tools)",
    )
    parser.add_argument("--split-file", default=None, help="split JSON (train/valid/test)")
    parser.add_argument(
        "--episodes",
        type=int,
        required=True,
        help="training steps (episodes, or batches for multiclass methods)",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="multiclass batch size")
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda")
    parser.add_argument("--output", required=True, help="run folder", renamed_from=("--out",))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=1000,
        help="save a kept snapshot (and validate) every N steps",
    )
    parser.add_argument(
        "--validation-episodes",
        type=int,
        default=100,
        help="valid-split episodes per validation (0: no validation)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_episode_arguments(parser)
    add_throughput_arguments(parser)
    parser.add_argument(
        "--fix-ml-pool",
        default=None,
        help="FIX-ML: fixed-support pool JSON (synthetic data: pool size k)",
    )
    add_learner_flags(parser)
    return parser


def dataset_from_args(args: argparse.Namespace) -> str:
    """The run's dataset as config.json records it: folders joined by commas, or 'synthetic'.
    The old spellings (`--dataset synthetic`, `--dataset A,B`) still work, with a note."""
    if args.synthetic:
        return SYNTHETIC
    folders = list(args.dataset)
    if folders == [SYNTHETIC]:
        print(
            f"note: --dataset {SYNTHETIC} is now --synthetic; the old spelling goes in "
            f"{OLD_SPELLINGS_UNTIL}",
            file=sys.stderr,
        )
        return SYNTHETIC
    if any("," in folder for folder in folders):
        print(
            "note: comma-separated --dataset is now one --dataset DIR per folder; the old "
            f"spelling goes in {OLD_SPELLINGS_UNTIL}",
            file=sys.stderr,
        )
    return ",".join(d for folder in folders for d in folder.split(",") if d)


def learner_config_from_args(args: argparse.Namespace) -> LearnerConfig:
    """The learner options given on the command line (the rest from the dataclasses'
    defaults); one line naming the flag on an option of another method or a bad value."""
    names = [f.name for f in cli_fields(LearnerConfig)]
    for options in method_option_classes():
        names += [f.name for f in cli_fields(options) if f.name not in names]
    config = learner_config(args.method, **given_values(args, names))
    return resolved_config(config)  # what runs; raises on a bad value or unknown backbone


def run_config_from_args(args: argparse.Namespace) -> RunConfig:
    """Validate the options (before any long work) and collect them in a RunConfig."""
    learner = learner_config_from_args(args)
    for name in ("episodes", "batch_size", "checkpoint_every"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(args, name)} is too small")
    if args.validation_episodes < 0:
        raise ValueError(f"--validation-episodes {args.validation_episodes}: expected >= 0")
    if args.fix_ml_pool is not None and not is_episodic(learner.method):
        raise ValueError("--fix-ml-pool applies to episodic methods (FIX-ML), not multiclass")
    dataset = dataset_from_args(args)
    args.loader_workers, args.decode_processes, loading = choose_loading(
        resolve_device(args.device), dataset, args.loader_workers, args.decode_processes
    )
    if loading is not None:
        print(loading, file=sys.stderr)
    check_throughput_options(
        args.loader_workers, args.decode_processes, args.keep_snapshots, dataset
    )
    options = EpisodeOptions(
        ways=args.ways,
        shots=args.shots,
        query=args.query,
        image_size=learner.image_size,
        fix_ml_pool=args.fix_ml_pool,
    )
    return RunConfig(
        learner=learner,
        dataset=dataset,
        split_file=args.split_file,
        episode_options=options,
        seed=args.seed,
        total_steps=args.episodes,
        checkpoint_every=args.checkpoint_every,
        validation_episodes=args.validation_episodes,
        batch_size=args.batch_size,
        loader_workers=args.loader_workers,
        decode_processes=args.decode_processes,
        keep_snapshots=args.keep_snapshots,
        amp=args.amp,
        channels_last=args.channels_last,
    )


def train(
    config: RunConfig,
    out: str,
    device_name: str = "auto",
    progress: bool = True,
    stop_after: int | None = None,
) -> LoopResult:
    """Train (or resume) the run described by `config` in folder `out`."""
    device = resolve_device(device_name)
    if config.dataset != SYNTHETIC and config.split_file is None:
        print("note: no --split-file; using the splits of the dataset spec", file=sys.stderr)
    options = config.episode_options
    if is_episodic(config.learner.method):
        open_train = functools.partial(
            open_episode_source, config.dataset, "train", config.split_file, options, config.seed
        )
    else:
        open_train = functools.partial(
            open_batch_source,
            config.dataset,
            config.split_file,
            config.batch_size,
            options,
            config.seed,
        )
    source = open_train(decode_processes=config.decode_processes)
    if not is_episodic(config.learner.method):
        config.learner.options.train_class_ids = [int(c) for c in source.class_ids]
    feed_config = FeedConfig(config.loader_workers)

    def stream(start: int) -> Iterator[Any]:
        return feed(source, open_train, start, feed_config, device)

    validate = None
    if config.validation_episodes > 0:
        eval_options = EpisodeOptions(
            ways=options.ways,
            shots=options.shots,
            query=options.query,
            image_size=options.image_size,
        )
        valid = open_episode_source(
            config.dataset, "valid", config.split_file, eval_options, config.seed
        )
        validate = validation_hook(lambda: valid.episodes(0), config.validation_episodes)
    try:
        make_deterministic(config.seed)
        learner = build_learner(config.learner).to(device)  # every option checked before writing
        learner.set_precision(config.amp, config.channels_last)
        write_or_check_run_config(out, config)
        loop = LoopConfig(
            config.total_steps, config.checkpoint_every, progress, config.keep_snapshots
        )
        return run_training(learner, stream, out, loop, validate, stop_after=stop_after)
    finally:
        close_source(source)
        if validate is not None:
            close_source(valid)


@user_faults(ValueError, FileNotFoundError)
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = run_config_from_args(args)
    result = train(config, args.output, args.device, progress=not args.no_progress)
    if result.start_step >= config.total_steps:
        print(f"{args.output}: already trained for {result.start_step} steps; nothing to do")
        return 0
    tail = result.losses[-min(len(result.losses), 50) :]
    line = f"{args.output}: steps {result.start_step}->{result.end_step}"
    if tail:
        line += f", mean loss of the last {len(tail)} steps {sum(tail) / len(tail):.4f}"
    if result.validation:
        line += f", last validation accuracy {result.validation[-1]['accuracy']:.4f}"
    print(line)
    return 0


def resume_line(argv: Sequence[str]) -> str:
    """What Ctrl-C prints: where the run stands and the command that resumes it."""
    args = build_parser().parse_args(argv)
    snapshots = list_snapshots(args.output)
    last = Path(args.output) / CHECKPOINTS / LAST  # the only one left with --keep-snapshots 0
    where = (
        f"last checkpoint step {snapshots[-1][0]}"
        if snapshots
        else f"last checkpoint {last}"
        if last.is_file()
        else "no checkpoint yet"
    )
    command = " ".join(shlex.quote(a) for a in ["python", "-m", "learners.train", *argv])
    return f"interrupted ({args.output}: {where}); resume with the same command: {command}"


if __name__ == "__main__":
    sys.exit(run_main(main, interrupted=lambda: resume_line(sys.argv[1:])))
