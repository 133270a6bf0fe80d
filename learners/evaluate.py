"""`python -m learners.evaluate`: accuracy of a trained run on test (or valid) episodes.

Example:
  python -m learners.evaluate --run RUN --split test --episodes 600 [--episode-shards DIR]
      [--hardness-model CKPT]

Prints mean accuracy with its 95% confidence interval (1.96 std / sqrt(n)) and the standard
deviation, overall and per source, and writes to --output (default RUN/eval/<name>/, the name made
from the settings, e.g. test-best-transductive-5way1shot15query-600ep):
  episodes.csv  a first '#' line naming the hardness extractor, then: episode, source, ways,
                support_size, query_size, mean/min/max_shots, accuracy, hardness (Dhillon eq. 9)
  classes.csv   episode, source, way, class_id, shots, queries, precision, recall
  summary.json  the numbers above, the label, and every setting of the evaluation
A folder holding results of other settings is never overwritten without --overwrite.
`--checkpoint all` evaluates every kept snapshot instead and writes snapshots.csv (for the
Kendall tau of validation vs test rankings). Evaluation episodes depend only on --seed (default
0, the same for every run) or come from materialised shards. Hardness is measured by
--hardness-model (a fixed extractor, as the paper does: any checkpoint or run folder of this
toolkit), else by the evaluated run itself. Under torchrun (`torchrun ... -m learners.evaluate --
--run RUN ...`) rank r evaluates batches r, r+W, ... of --episodes-per-batch consecutive
episodes (`learners.evaluation.sharded_evaluation`) and rank 0 writes them all.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from episodes.sampling.sampler_factory import split_file_notes
from episodes.util.atomic_files import atomic_path, write_text_atomically
from episodes.util.cli_errors import UserError, run_main, user_faults
from episodes.util.cli_style import add_dataset_argument, command_parser, finite_float
from episodes.util.output_overlap import refuse_overlap
from learners import LearnerConfigError, LearnerInputError
from learners.evaluation.batched_memory import CPU_EPISODES_PER_BATCH, default_episodes_per_batch
from learners.evaluation.episode_eval import (
    CLASS_FIELDS,
    EPISODE_FIELDS,
    EpisodeRecord,
    HardnessMeasure,
)
from learners.evaluation.evaluation_folder import (
    check_output_folder,
    default_label,
    folder_name,
    result_folder,
)
from learners.evaluation.hardness_model import fixed_hardness_measure, run_hardness_measure
from learners.evaluation.metrics import summarize_accuracies
from learners.evaluation.sharded_evaluation import evaluate_shard
from learners.feed.episode_feed import DECODE_DEVICES, check_decode_device
from learners.feed.episode_source import (
    SYNTHETIC,
    EpisodeSource,
    ShardEpisodeSource,
    open_episode_source,
)
from learners.feed.sampler_options import (
    add_sampler_arguments,
    sampler_flags_given,
    sampler_options_from_args,
)
from learners.inference.md_finetune import check_md_finetune_flags
from learners.methods.config_fields import at_evaluation, flag_name
from learners.methods.config_flags import add_config_flags, given_values
from learners.methods.learner import Learner
from learners.methods.multiclass import MulticlassLearner
from learners.methods.registry import method_option_classes, methods_sharing
from learners.nn.batch_norm import BATCH_NORM_MODES
from learners.training.device import make_deterministic, resolve_device
from learners.training.distributed import (
    SINGLE_PROCESS,
    RankInfo,
    on_rank_zero,
    one_line_per_fault,
    rank_device,
    rank_info_from_env,
    rank_session,
)
from learners.training.run_dir import RunConfig, load_run_learner, read_run_config
from learners.training.training_loop import BEST, CHECKPOINTS, list_snapshots

__all__ = [
    "build_parser",
    "DEFAULT_EPISODES",
    "EPISODE_FLAGS",
    "evaluate_run",
    "evaluation_option_names",
    "evaluation_settings",
    "FINETUNE_INFERENCES",
    "FINETUNE_OPTIONS",
    "main",
    "SETTINGS_OPTIONS",
    "SNAPSHOT_FIELDS",
    "split_divergence",
    "summarize_records",
]

SNAPSHOT_FIELDS = ("step", "accuracy", "std", "ci95", "n")
DEFAULT_EPISODES = 600
FINETUNE_INFERENCES = ("finetune", "transductive")
FINETUNE_OPTIONS = (
    "finetune_epochs",
    "finetune_lr",
    "entropy_log_ways",
    "finetune_freeze_bn",
    "finetune_augment",
    "finetune_bn_micro_batch",
)
# Changed options recorded by name in an evaluation's settings (the others under "options").
SETTINGS_OPTIONS = ("inference", "finetune_freeze_bn", "finetune_augment")


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("learners.evaluate", __doc__)
    parser.add_argument("--run", required=True, help="run folder of learners.train")
    data = parser.add_argument_group(
        "data and episodes", "which episodes are evaluated (default: the run's data and shape)"
    )
    data.add_argument(
        "--split",
        default=None,
        choices=("train", "valid", "test"),
        help="the split whose classes the episodes are drawn from: train, valid or test "
        "(default test)",
    )
    data.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="evaluation episodes (default 600; with --episode-shards, all the shards hold)",
    )
    data.add_argument("--episode-shards", default=None, help="materialised episode shards")
    add_dataset_argument(
        data,
        required=False,
        help="evaluate on this converted dataset folder instead of the run's (repeatable)",
    )
    data.add_argument(
        "--split-file",
        default=None,
        help="split file replacing the run's (or, with --dataset, the dataset spec's) splits",
    )
    data.add_argument("--seed", type=int, default=0, help="evaluation episode seed")
    data.add_argument(
        "--ways", type=int, default=None, help="classes per episode (default: the run's)"
    )
    data.add_argument(
        "--shots", type=int, default=None, help="support examples per class (default: the run's)"
    )
    data.add_argument(
        "--query", type=int, default=None, help="query examples per class (default: the run's)"
    )
    data.add_argument(
        "--base-novel-lambda",
        type=finite_float,
        default=None,
        help="FIX-ML tau_BN(lambda): classes from the test split w.p. lambda",
    )
    add_sampler_arguments(
        parser, "how episodes are drawn beyond --ways/--shots/--query (default: the run's)"
    )
    model = parser.add_argument_group("model", "which trained weights, and how they normalise")
    model.add_argument(
        "--checkpoint", default=None, help="best (default when validated), last, step_N, or all"
    )
    model.add_argument(
        "--batch-norm",
        choices=BATCH_NORM_MODES,
        default=None,
        help="evaluate the trained weights under another BatchNorm convention (default: the run's)",
    )
    hardness = parser.add_argument_group(
        "hardness", "how each episode's hardness is measured (Dhillon et al. eq. 9)"
    )
    hardness.add_argument(
        "--hardness-model",
        default=None,
        help="checkpoint (.pt) or run folder (its last.pt) of a fixed extractor for hardness: "
        "the logits of a multiclass network, else backbone features (default: this run)",
    )
    hardness.add_argument(
        "--hardness-relu",
        action="store_true",
        help="ReLU before normalising in the hardness (the paper and its code have none)",
    )
    hardness.add_argument("--no-hardness", action="store_true")
    output = parser.add_argument_group(
        "output", "where the results go, and the name reports give them"
    )
    output.add_argument(
        "--output",
        default=None,
        help="output folder (default RUN/eval/<name from the settings>)",
        renamed_from=("--out",),
    )
    output.add_argument(
        "--overwrite",
        action="store_true",
        help="replace results of other settings already in the output folder",
    )
    output.add_argument("--label", default=None, help="method name in reports")
    output.add_argument("--no-progress", action="store_true", help="no progress bar")
    device = parser.add_argument_group(
        "device and batching", "where the episodes are evaluated, and how many at once"
    )
    device.add_argument(
        "--device", default="auto", help="auto (CUDA when present), cpu, cuda or cuda:N"
    )
    device.add_argument(
        "--decode-device",
        choices=DECODE_DEVICES,
        default="cpu",
        help="cuda: decode the episodes' JPEG records on the GPU (nvJPEG); pixels differ "
        'slightly from the reference decoder\'s (docs/operations.md, "Feeding a GPU")',
    )
    device.add_argument(
        "--episodes-per-batch",
        type=int,
        default=None,
        help="episodes evaluated together (default: from the GPU's free memory, "
        f"{CPU_EPISODES_PER_BATCH} on CPU; 1 is the one-at-a-time loop; results do not "
        "depend on it)",
    )
    taken: set[str] = set()
    for options in method_option_classes():
        group = parser.add_argument_group(
            f"change an option of a trained {', '.join(methods_sharing(options))} run "
            "(default: the run's)",
            "how the trained run infers an episode (fine-tuning, k-NN, inner-loop steps)",
        )
        add_config_flags(group, options, only=at_evaluation, taken=taken, show_defaults=False)
    return parser


def evaluation_option_names() -> list[str]:
    """The method options `learners.evaluate` may change on a trained run (their flags)."""
    names: list[str] = []
    for options in method_option_classes():
        names += [f.name for f in dataclasses.fields(options) if at_evaluation(f)]
    return list(dict.fromkeys(names))


def split_divergence(split_file: str | None) -> float | None:
    """ATG's R recorded in a split file (read by `episodes.records.split_file`'s parser), when there is one."""
    if not split_file or not Path(split_file).is_file():
        return None
    from episodes.records.split_file import read_split_file

    r = read_split_file(split_file).parameters.get("R")
    return float(r) if isinstance(r, int | float) and not isinstance(r, bool) else None


def _default_checkpoint(run: str) -> str:
    return "best" if (Path(run) / CHECKPOINTS / BEST).is_file() else "last"


def _episode_options(args: argparse.Namespace, config: RunConfig) -> Any:
    run_options = config.episode_options
    return replace(
        run_options,
        ways=args.ways if args.ways is not None else run_options.ways,
        shots=args.shots if args.shots is not None else run_options.shots,
        query=args.query if args.query is not None else run_options.query,
        fix_ml_pool=None,
        base_novel_lambda=args.base_novel_lambda,
        sampler={**run_options.sampler, **sampler_options_from_args(args)},
    )


def _dataset(args: argparse.Namespace) -> str | None:
    """--dataset folders as run configs record them (comma-joined), None when not given."""
    if not args.dataset:
        return None
    return ",".join(d for folder in args.dataset for d in folder.split(",") if d)


def _split_file(args: argparse.Namespace, config: RunConfig) -> str | None:
    """The split file episodes are drawn with: --split-file when given (checked here, before
    any work), else the run's (without --dataset) or none (the dataset spec's splits)."""
    if args.split_file is not None:
        if args.episode_shards is not None:
            raise UserError(
                f"--split-file {args.split_file}: episode shards hold their own episodes; "
                "give --split-file or --episode-shards, not both"
            )
        if config.dataset == SYNTHETIC and not args.dataset:
            raise UserError(
                f"--split-file {args.split_file}: the run trained on synthetic data, which has "
                "no classes to split; add --dataset DIR"
            )
        if not Path(args.split_file).is_file():
            raise UserError(f"--split-file {args.split_file}: no such file")
        return args.split_file
    return None if args.dataset else config.split_file


def _episode_source(args: argparse.Namespace, config: RunConfig) -> EpisodeSource:
    if args.episode_shards is not None:
        return ShardEpisodeSource(args.episode_shards, config.learner.image_size)
    dataset = _dataset(args) or config.dataset
    split_file = _split_file(args, config)
    if split_file is not None:
        for note in split_file_notes(dataset.split(","), split_file):
            print(f"note: {note}", file=sys.stderr)
    return open_episode_source(
        dataset,
        args.split,
        split_file,
        _episode_options(args, config),
        args.seed,
        decode_device=args.decode_device,
    )


def _check_decode_device(args: argparse.Namespace, device: Any) -> None:
    """`--decode-device cuda`: refused in one line where it cannot run (before any work)."""
    if args.decode_device == "cpu":
        return
    if args.episode_shards is not None:
        raise UserError(
            f"--decode-device {args.decode_device} decodes dataset records; episode shards are "
            "read on the CPU (drop --decode-device or --episode-shards)"
        )
    dataset = _dataset(args) or read_run_config(args.run).dataset
    check_decode_device(args.decode_device, device, None, None, dataset)


def _learner_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return given_values(args, evaluation_option_names())


def _check_finetune_flags(overrides: dict[str, Any], learner: Learner) -> None:
    flags = [flag_name(name) for name in FINETUNE_OPTIONS if name in overrides]
    inference = learner.options.inference if isinstance(learner, MulticlassLearner) else None
    if flags and inference not in FINETUNE_INFERENCES:
        what = f"inference {inference}" if inference else f"method {learner.config.method}"
        raise UserError(
            f"{' and '.join(flags)} apply to fine-tuning ({', '.join(FINETUNE_INFERENCES)}), "
            f"not {what}: add --inference finetune or transductive (multiclass runs)"
        )


def evaluation_settings(
    args: argparse.Namespace, learner: Learner, config: RunConfig, which: str, step: int
) -> dict[str, Any]:
    """Everything that decides an evaluation's numbers (recorded in summary.json)."""
    options = _episode_options(args, config)
    finetunes = (
        isinstance(learner, MulticlassLearner) and learner.options.inference in FINETUNE_INFERENCES
    )
    overrides = _learner_overrides(args)
    others = {k: v for k, v in overrides.items() if k not in SETTINGS_OPTIONS}
    if args.batch_norm is not None:
        others["batch_norm"] = args.batch_norm
    shards = str(Path(args.episode_shards).resolve()) if args.episode_shards else None
    return {
        "run": str(Path(args.run).resolve()),
        "run_name": Path(args.run).resolve().name,
        "method": config.learner.method,
        "checkpoint": which,
        "checkpoint_step": step if which != "all" else None,
        "split": args.split,
        "episodes": args.episodes,
        "seed": args.seed,
        "ways": None if shards else options.ways,
        "shots": None if shards else options.shots,
        "query": None if shards else options.query,
        "inference": overrides.get("inference"),
        "finetune_freeze_bn": learner.options.finetune_freeze_bn if finetunes else None,
        "finetune_augment": learner.options.finetune_augment if finetunes else None,
        "options": others or None,
        "base_novel_lambda": args.base_novel_lambda,
        "episode_shards": shards,
        **({"sampler": options.sampler} if options.sampler and not shards else {}),
        "dataset": _dataset(args),
        "split_file": _split_file(args, config),
        "hardness": None,
    }


def _write_csv(
    path: Path, fields: Sequence[str], rows: Sequence[dict[str, Any]], comment: str | None = None
) -> None:
    with atomic_path(path) as tmp, tmp.open("w", newline="") as handle:
        if comment is not None:
            handle.write(f"# {comment}\n")
        writer = csv.DictWriter(handle, fieldnames=list(fields))
        writer.writeheader()
        writer.writerows(rows)


def _format(summary: dict[str, float]) -> str:
    return (
        f"{100 * summary['mean']:.2f}% +- {100 * summary['ci95']:.2f} (95% CI), "
        f"std {100 * summary['std']:.2f}, n={summary['n']}"
    )


def summarize_records(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    overall = summarize_accuracies([r.accuracy for r in records]).to_dict()
    per_source = {}
    for source in sorted({r.source for r in records}):
        values = [r.accuracy for r in records if r.source == source]
        per_source[source] = summarize_accuracies(values).to_dict()
    hardness = [r.hardness for r in records if not math.isnan(r.hardness)]
    return {
        "accuracy": overall,
        "per_source": per_source,
        "mean_hardness": sum(hardness) / len(hardness) if hardness else None,
    }


def _hardness_measure(
    args: argparse.Namespace, learner: Learner, device: Any
) -> HardnessMeasure | None:
    if args.no_hardness:
        return None
    if args.hardness_model is not None:
        return fixed_hardness_measure(
            args.hardness_model, device, args.hardness_relu, learner.normalization
        )
    return run_hardness_measure(learner, args.hardness_relu)


def _evaluate_snapshots(
    args: argparse.Namespace,
    steps: Sequence[tuple[int, str]],
    source: EpisodeSource,
    device: Any,
    overrides: dict[str, Any],
    amp: str = "off",
    ranks: RankInfo = SINGLE_PROCESS,
) -> list[dict[str, Any]]:
    rows = []
    for step, label in steps:
        learner, _, _ = load_run_learner(args.run, label, device, overrides)
        if args.batch_norm is not None:
            learner.switch_batch_norm(args.batch_norm)
        make_deterministic(args.seed)
        records, _ = evaluate_shard(  # each rank its share under torchrun
            learner,
            source,
            args.episodes,
            ranks,
            args.seed,
            progress=not args.no_progress,
            description=f"step {step}",
            **_batching(args, learner, amp),
        )
        summary = summarize_accuracies([r.accuracy for r in records])
        rows.append(
            {
                "step": step,
                "accuracy": summary.mean,
                "std": summary.std,
                "ci95": summary.ci95,
                "n": summary.n,
            }
        )
        if ranks.is_writer:
            print(f"step {step}: {_format(summary.to_dict())}")
    return rows


def _batching(args: argparse.Namespace, learner: Learner, amp: str) -> dict[str, Any]:
    """evaluate_episodes' batching arguments: --episodes-per-batch (or the device's default)
    and the run's --amp."""
    per_batch = args.episodes_per_batch
    if per_batch is None:
        per_batch = default_episodes_per_batch(learner)
    return {"episodes_per_batch": per_batch, "amp": amp}


def _write_summary(out: Path, summary: dict[str, Any]) -> None:
    write_text_atomically(
        out / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n"
    )


def _episode_count(args: argparse.Namespace) -> int:
    """--episodes, checked against the shards' count before any work (default: all of them)."""
    if args.episode_shards is None or not Path(args.episode_shards).exists():
        return DEFAULT_EPISODES if args.episodes is None else args.episodes
    from episodes.reading.episode_shards import shard_episode_count

    held = shard_episode_count(args.episode_shards)  # a ShardError is one line as it is
    if args.episodes is not None and args.episodes > held:
        raise UserError(
            f"--episodes {args.episodes}: --episode-shards {args.episode_shards} holds {held} "
            f"episodes; pass --episodes {held} or fewer (or leave it out for all of them)"
        )
    return held if args.episodes is None else args.episodes


def _check_output(out: Path, args: argparse.Namespace, settings: dict[str, Any]) -> None:
    """The output may lie in the run's `eval/` (its default place) but is never a folder the
    evaluation reads, nor around or inside one; then `check_output_folder`'s rules."""
    read = [
        ("--run", args.run),
        ("--split-file", args.split_file),
        ("--episode-shards", args.episode_shards),
        ("--hardness-model", args.hardness_model),
        *(("--dataset", d) for folder in args.dataset or () for d in folder.split(",") if d),
    ]
    refuse_overlap(("--output", out), read, allowed_inside=[Path(args.run) / "eval"])
    check_output_folder(out, settings, args.overwrite)


# Flags that say how episodes are drawn, which episode shards fix (they hold their episodes).
EPISODE_FLAGS = ("--split", "--ways", "--shots", "--query", "--base-novel-lambda", "--dataset")


def _check_shard_flags(args: argparse.Namespace) -> None:
    """With --episode-shards, the flags that would draw other episodes are refused in one line
    (the shards fix the episodes; they were silently ignored)."""
    if args.episode_shards is None:
        return
    given = [
        flag
        for flag in EPISODE_FLAGS
        if getattr(args, flag[2:].replace("-", "_")) not in (None, [])  # lambda 0 is given
    ] + sampler_flags_given(args)
    if given:
        raise LearnerConfigError(
            f"{' and '.join(given)} with --episode-shards {args.episode_shards}: the shards hold "
            "their episodes (ways, shots, classes); drop "
            f"{'it' if len(given) == 1 else 'them'} or evaluate without --episode-shards"
        )


def evaluate_run(args: argparse.Namespace, ranks: RankInfo = SINGLE_PROCESS) -> dict[str, Any]:
    """Evaluate (as rank `ranks.rank` of a torchrun start, rank 0 writing, when sharded)."""
    _check_shard_flags(args)
    args.split = args.split or "test"
    device = rank_device(ranks, resolve_device(args.device))
    _check_decode_device(args, device)  # before the episodes are counted or read
    args.episodes = _episode_count(args)
    if args.episodes < 1:
        raise LearnerConfigError(f"--episodes {args.episodes}: expected >= 1")
    if args.episodes_per_batch is not None and args.episodes_per_batch < 1:
        raise LearnerConfigError(f"--episodes-per-batch {args.episodes_per_batch}: expected >= 1")
    which = args.checkpoint or _default_checkpoint(args.run)
    overrides = _learner_overrides(args)
    steps = (
        [(s, f"step_{s}") for s, _ in list_snapshots(args.run)]
        if which == "all"
        else [(None, which)]
    )
    if not steps:
        raise LearnerInputError(f"--run {args.run}: no snapshots to evaluate")
    learner, config, step = load_run_learner(args.run, steps[0][1], device, overrides)
    if args.batch_norm is not None:
        learner.switch_batch_norm(args.batch_norm)
    _check_finetune_flags(overrides, learner)
    check_md_finetune_flags(overrides, getattr(learner.options, "inference", None))
    source = _episode_source(args, config)
    settings = evaluation_settings(args, learner, config, which, step)
    hardness = None if which == "all" else _hardness_measure(args, learner, device)
    settings["hardness"] = hardness.header() if hardness else None
    name = folder_name(settings, explicit_split_file=args.split_file)
    out = Path(args.output) if args.output else Path(args.run) / "eval" / name
    # Before any long work (on rank 0, whose refusal ends every rank).
    on_rank_zero(lambda: _check_output(out, args, settings), ranks)
    if hardness is not None and args.hardness_model is None and ranks.is_writer:
        print(
            "note: hardness measured by the evaluated run itself; the paper measures every "
            "method with one fixed extractor (--hardness-model CKPT)",
            file=sys.stderr,
        )
    label = args.label or default_label(settings)
    if which == "all":
        rows = _evaluate_snapshots(args, steps, source, device, overrides, config.amp, ranks)
        if not ranks.is_writer:
            return {}
        summary = {"label": label, "settings": settings, "snapshots": rows, "out": str(out)}
        with result_folder(out) as folder:  # created only once everything is written
            _write_csv(folder / "snapshots.csv", SNAPSHOT_FIELDS, rows)
            _write_summary(folder, summary)
        print(f"wrote {out}/snapshots.csv, summary.json")
        return summary
    make_deterministic(args.seed)
    batching = _batching(args, learner, config.amp)
    records, class_rows = evaluate_shard(  # each rank its share under torchrun
        learner,
        source,
        args.episodes,
        ranks,
        args.seed,
        hardness,
        not args.no_progress,
        **batching,
    )
    if not ranks.is_writer:
        return {}  # rank 0 writes every rank's records
    header = hardness.header() if hardness else "hardness: not measured (--no-hardness)"
    summary = {
        "run": str(args.run),
        "label": label,
        "method": config.learner.method,
        "backbone": config.learner.backbone,
        "inference": overrides.get("inference"),
        "checkpoint": which,
        "split": args.split,
        "episodes": args.episodes,
        "seed": args.seed,
        "episode_shards": args.episode_shards,
        "base_novel_lambda": args.base_novel_lambda,
        "split_R": split_divergence(_split_file(args, config)),
        "hardness_extractor": hardness.description if hardness else None,
        "settings": settings,
        # How the episodes were grouped, not a setting: episode i's draws come from (seed, i)
        # and it is adapted alone, so B and the ranks leave the records as they are.
        "episodes_per_batch": batching["episodes_per_batch"],
        "decode_device": args.decode_device,  # the records' decoder (GPU: pixels differ slightly)
        **summarize_records(records),
        "out": str(out),
    }
    with result_folder(out) as folder:  # created only once everything is written
        _write_csv(folder / "episodes.csv", EPISODE_FIELDS, [r.to_row() for r in records], header)
        _write_csv(folder / "classes.csv", CLASS_FIELDS, class_rows)
        _write_summary(folder, summary)
    print(f"{summary['label']} on {args.split}: {_format(summary['accuracy'])}")
    for source_name, values in summary["per_source"].items():
        print(f"  {source_name}: {_format(values)}")
    print(f"wrote {out}/episodes.csv, classes.csv, summary.json")
    return summary


@user_faults
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    ranks = rank_info_from_env()
    if not ranks.sharded:
        evaluate_run(args)
        return 0
    with one_line_per_fault(ranks), rank_session(resolve_device(args.device)) as (ranks, _):
        evaluate_run(args, ranks)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
