"""`python -m learners.train`: train one method on episodes (or batches for multiclass).

Example:
  python -m learners.train --method protonet --backbone cnn4 --dataset OUT \
      --split-file S.json --steps 20000 --device auto --output RUN

Re-running the same command on the same --output resumes from the last checkpoint; a larger
--steps (or --epochs) continues training. Multiclass methods may count their length in
epochs over the training images (--epochs 120 --cosine-cycle-epochs 40 80) and validate on
held-out images of the training classes (--validation held-out --held-out-per-class 10%).
`--synthetic` trains on generated blob images. Every option of the learners is a flag (generated from their config dataclasses); a method's own options are
refused for another method.

On several GPUs or machines, start the same command with torchrun (each rank reads its own
share of every step's items, rank 0 alone writes):
  torchrun --nproc_per_node 8 -m learners.train ... --meta-batch 2
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import shlex
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from episodes.sampling.sampler_factory import split_file_notes
from episodes.util.cli_errors import run_main, user_fault_lines, user_faults
from episodes.util.cli_style import OLD_SPELLINGS_UNTIL, add_dataset_argument, command_parser
from episodes.util.output_overlap import refuse_overlap
from learners import LearnerConfigError
from learners.evaluation.episode_eval import validation_hook
from learners.evaluation.held_out_validation import held_out_hook
from learners.feed.class_holdout import FLAG as HOLD_OUT_FLAG
from learners.feed.class_holdout import trained_image_count
from learners.feed.episode_feed import (
    DECODE_DEVICES,
    FeedConfig,
    check_decode_device,
    check_throughput_options,
    feed,
)
from learners.feed.episode_source import (
    SYNTHETIC,
    EpisodeOptions,
    check_episode_options,
    close_source,
    dataset_dirs,
    open_batch_source,
    open_episode_source,
    open_sharded,
)
from learners.feed.sampler_options import add_sampler_arguments, sampler_options_from_args
from learners.feed.validation_dataset import RECORD_KEY as VALIDATION_DATASET_KEY
from learners.feed.validation_dataset import resolve_validation_dataset
from learners.methods.config_fields import at_evaluation, cli_fields
from learners.methods.config_flags import add_config_flags, given_values
from learners.methods.learner_config import LearnerConfig
from learners.methods.registry import (
    build_learner,
    is_episodic,
    learner_config,
    method_names,
    method_option_classes,
    methods_sharing,
    resolved_config,
)
from learners.nn.backbones import canonical_backbone_name
from learners.optim.lr_schedule import SCHEDULE_OPTIONS, check_cycle_lengths
from learners.optim.mixed_precision import AMP_MODES
from learners.training.backbone_init import RECORD_KEY as INIT_FROM_KEY
from learners.training.backbone_init import (
    BackboneInit,
    apply_backbone_init,
    read_backbone_init,
    write_record,
)
from learners.training.device import choose_loading, make_deterministic, resolve_device
from learners.training.distributed import (
    SINGLE_PROCESS,
    RankInfo,
    ShardPlan,
    agree_on_setup,
    broadcast_module,
    cores_per_rank,
    loading_note,
    on_rank_zero,
    one_line_per_fault,
    rank_info_from_env,
    rank_session,
)
from learners.training.meta_batch import meta_batch_stepper
from learners.training.recipe_files import apply_recipe, recipe_listing, recipe_record
from learners.training.run_dir import RunConfig, lock_run_folder, write_or_check_run_config
from learners.training.run_length import (
    DEFAULT_CHECKPOINT_EVERY,
    RUN_LENGTH_KEY,
    check_length_flags,
    check_length_source,
    cycles_note,
    resolve_run_length,
)
from learners.training.training_loop import (
    CHECKPOINTS,
    LAST,
    LoopConfig,
    LoopResult,
    list_snapshots,
    run_training,
)
from learners.training.validation_choice import (
    FEW_SHOT,
    VALIDATIONS,
    ValidationRequest,
    checked_hold_out,
    hold_out_record,
    recorded_hold_out,
)

__all__ = [
    "add_data_arguments",
    "add_device_arguments",
    "add_method_arguments",
    "add_model_arguments",
    "add_optimisation_arguments",
    "add_output_arguments",
    "BATCH_SIZE",
    "build_parser",
    "dataset_from_args",
    "learner_config_from_args",
    "main",
    "MODEL_FIELDS",
    "rank_meta_batch",
    "resume_line",
    "run_config_from_args",
    "train",
]

BATCH_SIZE = 64  # --batch-size of a multiclass method when not given (recorded for every run)
# The shared learner options that describe the network (the others: optimiser and schedule).
MODEL_FIELDS = (
    "backbone",
    "image_size",
    "width",
    "dropblock",
    "batch_norm",
    "input_scaling",
    "input_alignment",
)


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "data and episodes",
        "what it trains and validates on (default: Meta-Dataset's variable ways/shots)",
    )
    data = group.add_mutually_exclusive_group(required=True)
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
    group.add_argument("--split-file", default=None, help="split JSON (train/valid/test)")
    group.add_argument("--ways", type=int, default=None, help="fixed ways")
    group.add_argument("--shots", type=int, default=None, help="fixed shots per class")
    group.add_argument("--query", type=int, default=None, help="fixed query examples per class")
    group.add_argument(
        "--fix-ml-pool",
        default=None,
        help="FIX-ML: fixed-support pool JSON (synthetic data: pool size k)",
    )
    group.add_argument(
        "--validation-episodes",
        type=int,
        default=100,
        help="valid-split episodes per validation (0: no validation)",
    )
    group.add_argument(
        "--validation",
        choices=VALIDATIONS,
        default=FEW_SHOT,
        help="what validation measures, and so which checkpoint is best.pt: few-shot (episodes "
        "of the valid split), or held-out (multiclass methods: the classifier's accuracy on "
        f"the images {HOLD_OUT_FLAG} sets apart, as Dhillon et al. select the epoch)",
    )
    group.add_argument(
        HOLD_OUT_FLAG,
        default=None,
        metavar="N_OR_PERCENT",
        help="with --validation held-out: hold out N images of each training class (e.g. 20) or "
        "a share of each (e.g. 10%%), drawn once from --seed and never trained on",
    )
    group.add_argument(
        "--validation-dataset",
        default=None,
        metavar="NAME_OR_FOLDER",
        help="validate on this dataset's valid split only: a --dataset's name (e.g. "
        "ilsvrc_2012, as Meta-Dataset) or a converted dataset folder; default (or 'all'): "
        "every --dataset's valid split",
    )


def add_model_arguments(parser: argparse.ArgumentParser, taken: set[str]) -> None:
    group = parser.add_argument_group(
        "model", "the network every method builds on, and where its weights start"
    )
    add_config_flags(group, LearnerConfig, only=lambda f: f.name in MODEL_FIELDS, taken=taken)
    group.add_argument(
        "--init-from",
        default=None,
        metavar="CHECKPOINT",
        help="start the backbone from another run's: a run folder (its best-validation "
        "checkpoint best.pt when it validated, else last.pt; the line printed says which) or a "
        ".pt file, as Meta-Dataset's learners start from a pre-training run's best checkpoint "
        "(--recipe meta_dataset/pretrain_resnet18, pretrain_convnet or pretrain_wide_resnet); "
        "same --backbone and --width; read once, when the run starts",
    )


def add_optimisation_arguments(parser: argparse.ArgumentParser, taken: set[str]) -> None:
    group = parser.add_argument_group(
        "optimisation and schedule",
        "steps and their items, the optimiser and its learning rate, numerics",
    )
    group.add_argument(
        "--steps",
        type=int,
        default=None,
        renamed_from=("--episodes",),
        help="training steps the run lasts (its length; each step trains on --meta-batch "
        "episodes, or batches for multiclass methods, per rank); or --epochs",
    )
    group.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="multiclass methods: the length in passes over the training classes' images "
        "(held-out ones excluded), an epoch being floor(images / (--batch-size x meta-batch)) "
        "steps; snapshots every epoch unless --checkpoint-every",
    )
    group.add_argument(
        "--cosine-cycle-epochs",
        type=int,
        nargs="+",
        default=None,
        metavar="EPOCHS",
        help="--lr-schedule cosine-cycles: each cycle's length in epochs (Dhillon et al.: 40 "
        "80), in place of --cosine-cycles and --cycle-multiplier; with --steps, the cycles "
        "share the run's steps in these proportions",
    )
    group.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help=f"multiclass methods: examples per batch (per rank; default {BATCH_SIZE})",
    )
    group.add_argument(
        "--meta-batch",
        type=int,
        default=1,
        help="episodes (multiclass: batches) per optimiser step and rank, each its own forward "
        "pass, the loss averaged; under torchrun a step takes meta-batch x ranks",
    )
    group.add_argument(
        "--seed",
        type=int,
        default=0,
        help="random seed of the initial weights and of the training episodes or batches",
    )
    add_config_flags(group, LearnerConfig, taken=taken)  # those the model group left
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


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "output and checkpoints", "where the run is written, how often it is saved and kept"
    )
    group.add_argument("--output", required=True, help="run folder", renamed_from=("--out",))
    group.add_argument(
        "--checkpoint-every",
        type=int,
        default=None,
        help="save a kept snapshot (and validate) every N steps (default: every epoch of a run "
        f"in --epochs, else {DEFAULT_CHECKPOINT_EVERY})",
    )
    group.add_argument(
        "--keep-snapshots",
        type=int,
        default=None,
        help="keep only the N newest step snapshots (last.pt and best.pt are always kept)",
    )
    group.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "device and loading",
        "where the steps run and how items are read (may change when a run resumes)",
    )
    group.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda")
    group.add_argument(
        "--loader-workers",
        type=int,
        default=None,
        help="DataLoader processes reading episodes ahead (0: the training process reads; "
        "default: chosen from the device and cores, learners.training.device.choose_loading)",
    )
    group.add_argument(
        "--decode-processes",
        type=int,
        default=None,
        help="with --loader-workers 0: the reader decodes JPEG records ahead in N processes",
    )
    group.add_argument(
        "--decode-device",
        choices=DECODE_DEVICES,
        default="cpu",
        help="cuda: decode JPEG records on the GPU (nvJPEG) in the training process; pixels "
        'differ slightly from the reference decoder\'s (docs/operations.md, "Feeding a GPU")',
    )


def add_method_arguments(parser: argparse.ArgumentParser, taken: set[str]) -> None:
    """Each method's own options, generated from their dataclasses: what is trained, then how
    a trained run infers an episode (the options `learners.evaluate` may change)."""
    for options in method_option_classes():
        names = ", ".join(methods_sharing(options))
        trained = parser.add_argument_group(f"options of {names}")
        add_config_flags(trained, options, only=lambda f: not at_evaluation(f), taken=taken)
        if any(at_evaluation(f) for f in cli_fields(options)):
            inference = parser.add_argument_group(
                f"inference of {names}",
                "how validation infers an episode (learners.evaluate may change these)",
            )
            add_config_flags(inference, options, only=at_evaluation, taken=taken)


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("learners.train", __doc__)
    parser.add_argument(
        "--method", required=True, help=f"the learner to train: one of {', '.join(method_names())}"
    )
    parser.add_argument(
        "--recipe",
        default=None,
        metavar="NAME_OR_PATH",
        help="a paper's training recipe as the defaults: FAMILY/NAME of a shipped one "
        "(learners/recipes/, --list-recipes) or PATH.toml, a file of your own in the same "
        "format (Python 3.11+); flags given override it",
    )
    parser.add_argument(
        "--list-recipes", action="store_true", help="print the recipes and their sources"
    )
    taken: set[str] = set()  # the generated flags added so far (each once)
    add_data_arguments(parser)
    add_sampler_arguments(
        parser, "how episodes are drawn beyond --ways/--shots/--query (validation's too)"
    )
    add_model_arguments(parser, taken)
    add_optimisation_arguments(parser, taken)
    add_output_arguments(parser)
    add_device_arguments(parser)
    add_method_arguments(parser, taken)
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


def run_config_from_args(args: argparse.Namespace, ranks: RankInfo = SINGLE_PROCESS) -> RunConfig:
    """Validate the options (before any long work) and collect them in a RunConfig."""
    learner = learner_config_from_args(args)
    if args.batch_size is not None and is_episodic(learner.method):
        raise LearnerConfigError(
            f"--batch-size {args.batch_size} (an option of the multiclass methods): not an "
            f"option of --method {learner.method}, which trains on episodes (--ways, --shots)"
        )
    args.batch_size = BATCH_SIZE if args.batch_size is None else args.batch_size
    check_length_flags(args.steps, args.epochs, args.cosine_cycle_epochs, learner.lr_schedule)
    if args.steps is not None and not args.cosine_cycle_epochs:
        check_cycle_lengths(learner.schedule(), args.steps)  # before any work
    for name in ("steps", "batch_size", "checkpoint_every", "meta_batch"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise LearnerConfigError(f"--{name.replace('_', '-')} {value} is too small")
    if args.validation_episodes < 0:
        raise LearnerConfigError(f"--validation-episodes {args.validation_episodes}: expected >= 0")
    if args.fix_ml_pool is not None and not is_episodic(learner.method):
        raise LearnerConfigError(
            "--fix-ml-pool applies to episodic methods (FIX-ML), not multiclass"
        )
    dataset = dataset_from_args(args)
    check_length_source(
        args.epochs, learner.method, is_episodic(learner.method), dataset == SYNTHETIC
    )
    hold_out = checked_hold_out(
        ValidationRequest(
            args.validation,
            args.held_out_per_class,
            args.validation_episodes,
            learner.method,
            is_episodic(learner.method),
            learner.batch_norm,
            dataset == SYNTHETIC,
        )
    )
    device = resolve_device(args.device)
    check_decode_device(
        args.decode_device, device, args.loader_workers, args.decode_processes, dataset
    )
    args.loader_workers, args.decode_processes, loading = choose_loading(
        device,
        dataset,
        args.loader_workers,
        args.decode_processes,
        cores=cores_per_rank(ranks),  # a node's cores split between its torchrun ranks
        decode_device=args.decode_device,
    )
    if loading is not None and ranks.is_writer:
        print(loading, file=sys.stderr)
    check_throughput_options(
        args.loader_workers, args.decode_processes, args.keep_snapshots, dataset
    )
    trained_images = None
    if args.epochs is not None or hold_out is not None:  # a class too small: refused here
        trained_images = trained_image_count(
            dataset_dirs(dataset), args.split_file, hold_out, args.seed
        )
    cycle_epochs = list(args.cosine_cycle_epochs or ())
    length = resolve_run_length(
        args.steps,
        args.epochs,
        args.checkpoint_every,
        cycle_epochs,
        trained_images,
        args.batch_size * args.meta_batch * ranks.world_size,
    )
    if args.epochs is not None and not cycle_epochs:  # the length is known only now
        check_cycle_lengths(learner.schedule(), length.total_steps)
    learner = replace(
        learner, cosine_cycle_epochs=cycle_epochs, steps_per_epoch=length.steps_per_epoch
    )
    validation_dataset = None
    if args.validation_episodes > 0 and hold_out is None:
        validation_dataset = resolve_validation_dataset(args.validation_dataset, dataset, SYNTHETIC)
    options = EpisodeOptions(
        ways=args.ways,
        shots=args.shots,
        query=args.query,
        image_size=learner.image_size,
        fix_ml_pool=args.fix_ml_pool,
        sampler=sampler_options_from_args(args),
    )
    check_episode_options(options, dataset)  # a sampler option off its bounds: one line, now
    config = RunConfig(
        learner=learner,
        dataset=dataset,
        split_file=args.split_file,
        episode_options=options,
        seed=args.seed,
        total_steps=length.total_steps,
        checkpoint_every=length.checkpoint_every,
        epochs=length.epochs,
        validation_episodes=args.validation_episodes,
        batch_size=args.batch_size,
        global_meta_batch=args.meta_batch * ranks.world_size,
        loader_workers=args.loader_workers,
        decode_processes=args.decode_processes,
        keep_snapshots=args.keep_snapshots,
        decode_device=args.decode_device,
        amp=args.amp,
        channels_last=args.channels_last,
    )
    if validation_dataset is not None:  # recorded only when not every --dataset's
        config.extra[VALIDATION_DATASET_KEY] = validation_dataset
    if args.init_from is not None:  # recorded only when given (older runs compare unchanged)
        config.extra[INIT_FROM_KEY] = os.path.abspath(args.init_from)
    if args.epochs is not None:
        config.extra[RUN_LENGTH_KEY] = length.record()
    if hold_out is not None:
        config.extra.update(hold_out_record(hold_out))
    return config


def rank_meta_batch(config: RunConfig, ranks: RankInfo) -> int:
    """This rank's items per step: the run's global meta-batch divided by the ranks."""
    if config.global_meta_batch < 1 or config.global_meta_batch % ranks.world_size:
        raise LearnerConfigError(
            f"a meta-batch of {config.global_meta_batch} items per step does not split over "
            f"{ranks.world_size} ranks: expected a multiple of the ranks"
        )
    return config.global_meta_batch // ranks.world_size


def train(
    config: RunConfig,
    out: str,
    device_name: str | torch.device = "auto",
    progress: bool = True,
    stop_after: int | None = None,
    ranks: RankInfo = SINGLE_PROCESS,
) -> LoopResult:
    """Train (or resume) the run described by `config` in folder `out` (as rank `ranks.rank`
    of a torchrun start, in its process group, when `ranks` says so)."""
    if isinstance(device_name, torch.device):
        device = device_name
    else:
        device = resolve_device(device_name)
    if config.dataset != SYNTHETIC and ranks.is_writer:
        for note in split_file_notes(config.dataset.split(","), config.split_file):
            print(f"note: {note}", file=sys.stderr)
    check_decode_device(  # the CLI checked already; callers of train() get the same lines
        config.decode_device, device, config.loader_workers, config.decode_processes, config.dataset
    )
    plan = ShardPlan(rank_meta_batch(config, ranks), ranks.rank, ranks.world_size)
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
            hold_out=recorded_hold_out(config.extra),
        )
    if ranks.sharded:
        open_train = functools.partial(open_sharded, open_train, plan)
    with agree_on_setup(ranks):  # a refused dataset: one line, not one per rank
        source = open_train(
            decode_processes=config.decode_processes, decode_device=config.decode_device
        )
        if not is_episodic(config.learner.method):
            config.learner.options.train_class_ids = [int(c) for c in source.class_ids]
        feed_config = FeedConfig(config.loader_workers)

        def stream(start: int) -> Iterator[Any]:
            return feed(source, open_train, start, feed_config, device)

        validate = None
        held_out = recorded_hold_out(config.extra)
        if held_out is not None and ranks.is_writer:
            valid = open_batch_source(
                config.dataset,
                config.split_file,
                config.batch_size,
                options,
                config.seed,
                decode_device=config.decode_device,
                hold_out=held_out,
            )
            validate = held_out_hook(functools.partial(valid.held_out_batches, config.batch_size))
        elif config.validation_episodes > 0 and ranks.is_writer:
            eval_options = EpisodeOptions(
                ways=options.ways,
                shots=options.shots,
                query=options.query,
                image_size=options.image_size,
                sampler=options.sampler,
            )
            valid = open_episode_source(
                config.extra.get(VALIDATION_DATASET_KEY, config.dataset),
                "valid",
                config.split_file,
                eval_options,
                config.seed,
                decode_device=config.decode_device,
            )
            validate = validation_hook(lambda: valid.episodes(0), config.validation_episodes)
    try:
        make_deterministic(config.seed)
        learner = build_learner(config.learner).to(device)  # every option checked before writing
        started: list[BackboneInit] = []
        on_rank_zero(functools.partial(_start_backbone, config, out, learner, started), ranks)
        learner.set_precision(config.amp, config.channels_last)
        broadcast_module(learner, ranks)  # rank 0's initial weights everywhere, as DDP does
        # One learners.train per --output (rank 0 holds the lock for its ranks).
        with lock_run_folder(out) if ranks.is_writer else contextlib.nullcontext():
            on_rank_zero(functools.partial(write_or_check_run_config, out, config), ranks)
            for init in started:
                write_record(out, init)
            loop = LoopConfig(
                config.total_steps,
                config.checkpoint_every,
                progress,
                config.keep_snapshots,
                meta_batch=plan.meta_batch,
            )
            step_fn = None
            if plan.global_meta_batch > 1:
                step_fn = meta_batch_stepper(plan, ranks, config.seed)
            return run_training(
                learner, stream, out, loop, validate, stop_after, step_fn=step_fn, ranks=ranks
            )
    finally:
        close_source(source)
        if validate is not None:
            close_source(valid)


def _start_backbone(config: RunConfig, out: str, learner: Any, started: list[BackboneInit]) -> None:
    """--init-from on a run that starts from step 0: the backbone takes the other run's
    weights (checked first: one line on a mismatch, nothing written). A resumed run continues
    from its own checkpoint and never reads the file again."""
    path = config.extra.get(INIT_FROM_KEY)
    if path is None or any((Path(out) / CHECKPOINTS).glob("*.pt")):
        return
    init = read_backbone_init(path, learner)
    apply_backbone_init(learner, init)
    print(init.line(path), file=sys.stderr)
    started.append(init)


def _follow_backbone_override(args: argparse.Namespace, overridden: dict[str, Any]) -> str | None:
    """A recipe's ResNet-18 input alignment goes with its backbone: `--backbone` given in its
    place drops it (recorded as an override; returns the note saying so), where
    `--input-alignment` given with another backbone is refused."""
    if "backbone" not in overridden or "input_alignment" in overridden:
        return None
    if (
        args.input_alignment in (None, "none")
        or canonical_backbone_name(args.backbone) == "resnet18"
    ):
        return None
    overridden["input_alignment"] = args.input_alignment
    note = (
        f"note: --backbone {args.backbone} replaces the recipe's {overridden['backbone']}, "
        f"and with it its --input-alignment {args.input_alignment} (ResNet-18 only)"
    )
    args.input_alignment = "none"
    return note


def _follow_length_override(
    args: argparse.Namespace, recipe: dict[str, Any], overridden: dict[str, Any]
) -> None:
    """A run has one length: `--steps` given where the recipe sets `epochs` (or `--epochs`
    where it sets `steps`) replaces the recipe's, recorded as an override (both given on
    the command line stays a refusal)."""
    for given, other in (("steps", "epochs"), ("epochs", "steps")):
        if given not in recipe and getattr(args, given) is not None and other in recipe:
            if other not in overridden:
                overridden[other] = recipe[other]
                setattr(args, other, None)


def _validated_args(argv: list[str], ranks: RankInfo) -> tuple[argparse.Namespace, RunConfig]:
    """Parsed and checked options. Every rank checks the same options, so only rank 0 prints a
    refusal (or a note); the others end quietly with the same status."""
    if ranks.is_writer:
        return _parsed_args(argv, ranks)
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            return _parsed_args(argv, ranks)
        except Exception as exc:
            if not user_fault_lines(exc):  # a bug keeps its traceback on every rank
                raise
            raise SystemExit(2) from None


def _parsed_args(argv: list[str], ranks: RankInfo) -> tuple[argparse.Namespace, RunConfig]:
    """The options with a --recipe's values as defaults (given flags override, recorded)."""
    parser = build_parser()
    recipe, overridden = apply_recipe(parser, argv)
    args = parser.parse_args(argv)
    if recipe is not None:
        _drop_other_schedules(args, recipe.values, overridden)
    refuse_overlap(("--output", args.output), _read_paths(args))
    note = _follow_backbone_override(args, overridden) if recipe is not None else None
    if recipe is not None:
        _follow_length_override(args, recipe.values, overridden)
    config = run_config_from_args(args, ranks)
    notes = [note, cycles_note(args.epochs, args.cosine_cycle_epochs or ())]
    for line in notes if ranks.is_writer else ():  # after the checks: a refusal stays one line
        if line:
            print(line, file=sys.stderr)
    if recipe is not None:
        config.extra.update(recipe_record(recipe, overridden, args))
    return args, config


def _drop_other_schedules(
    args: argparse.Namespace, recipe_values: dict[str, Any], overridden: dict[str, Any]
) -> None:
    """A recipe's options of its own schedule are left out when the command line chooses
    another (`--lr-schedule constant` over an exponential recipe); given on the command line,
    they are refused (`check_schedule_options`)."""
    for owner, names in SCHEDULE_OPTIONS.items():
        for name in names:
            if owner != args.lr_schedule and name in recipe_values and name not in overridden:
                setattr(args, name, None)


def _read_paths(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """What a training run reads, as (flag, path) pairs for the output/input rule."""
    paths = [(flag, getattr(args, name, None)) for flag, name in _READ_FLAGS]
    paths += [("--dataset", folder) for folder in args.dataset or ()]
    validation = args.validation_dataset  # a dataset's name or a folder
    if validation and Path(validation).exists():
        paths.append(("--validation-dataset", validation))
    return paths


_READ_FLAGS = (
    ("--split-file", "split_file"),
    ("--init-from", "init_from"),
    ("--fix-ml-pool", "fix_ml_pool"),
)


def _train_ranks(args: argparse.Namespace, config: RunConfig, ranks: RankInfo) -> LoopResult:
    """`train`, in the process group of a torchrun start when there is one."""
    device = resolve_device(args.device)
    progress = not args.no_progress
    if not ranks.sharded:
        return train(config, args.output, device, progress=progress)
    note = loading_note(config.loader_workers, config.decode_processes, ranks)
    if note and ranks.is_writer:
        print(note, file=sys.stderr)
    with one_line_per_fault(ranks), rank_session(device) as (ranks, device):
        return train(config, args.output, device, progress=progress, ranks=ranks)


@user_faults
def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--list-recipes" in argv:
        print(recipe_listing())
        return 0
    ranks = rank_info_from_env()
    args, config = _validated_args(argv, ranks)
    result = _train_ranks(args, config, ranks)
    if not ranks.is_writer:
        return 0
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
    parser = build_parser()
    apply_recipe(parser, argv)
    args = parser.parse_args(argv)
    snapshots = list_snapshots(args.output)
    last = Path(args.output) / CHECKPOINTS / LAST  # the only one left with --keep-snapshots 0
    where = (
        f"last checkpoint step {snapshots[-1][0]}"
        if snapshots
        else f"last checkpoint {last}"
        if last.is_file()
        else "no checkpoint yet"
    )
    if rank_info_from_env().sharded:
        command = " ".join(shlex.quote(a) for a in ["-m", "learners.train", *argv])
        return (
            f"interrupted ({args.output}: {where}); resume with the same torchrun command "
            f"(torchrun ... {command})"
        )
    command = " ".join(shlex.quote(a) for a in ["python", "-m", "learners.train", *argv])
    return f"interrupted ({args.output}: {where}); resume with the same command: {command}"


if __name__ == "__main__":
    sys.exit(run_main(main, interrupted=lambda: resume_line(sys.argv[1:])))
