"""`python -m splits.embed`: each class's mean feature vector as a Beam job (ATG eq. 4).

  python -m splits.embed --dataset OUT/omniglot --model RUN_OR_CHECKPOINT --output E.npz
  python -m splits.embed --dataset OUT/omniglot --pretrain cnn4 --output E.npz

`--dataset` may be a URL (s3://, gs://): the workers read its records there, one ranged read
per record (episodes.storage.remote_records), so no worker needs a local copy.
`--model` takes a checkpoint written by learners (a .pt file, or a run folder: its last.pt).
`--pretrain` first trains that backbone by cross-entropy over all classes of the dataset (ATG
sec. 5: the feature extractor is pretrained on the data being partitioned) and keeps its run
folder next to the output (E.npz -> E.checkpoint/; re-running resumes or reuses it). The npz
(splits.embeddings.embeddings_file) holds the class names in spec order, the float32 matrix, the model's
description and a hash of its weights. Runner flags (--runner, --direct_num_workers, ...) go to
Beam. The pipeline itself is `splits.embeddings.pipeline`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from beam_pipelines.runners.options import add_runner_arguments, make_runner
from episodes.storage import paths as storage_paths
from episodes.util.cli_errors import UserError, run_main, user_faults
from episodes.util.cli_style import (
    add_dataset_argument,
    command_parser,
    finite_float,
    single_dataset,
)
from episodes.util.output_overlap import refuse_overlap
from splits.embeddings.pipeline import (
    EmbedError,
    EmbedOptions,
    check_dataset,
    check_output,
    embed_dataset,
)

__all__ = ["build_parser", "main", "pretrain_config_from_args"]


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "splits.embed",
        description="Per-class mean features of a converted dataset (ATG class embeddings).",
    )
    add_dataset_argument(parser, several=False)
    model = parser.add_argument_group("model (exactly one)")
    model.add_argument(
        "--model", default=None, help="learners checkpoint (.pt) or run folder (its last.pt)"
    )
    model.add_argument(
        "--pretrain",
        default=None,
        metavar="BACKBONE",
        help="first train BACKBONE (cnn4, resnet12, resnet18, wrn28_10) by cross-entropy on "
        "every class of --dataset",
    )
    parser.add_argument("--output", required=True, help="embeddings file to write (.npz)")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing embeddings file"
    )
    parser.add_argument(
        "--batch-size", type=int, default=64, help="images per batch (one forward pass)"
    )
    parser.add_argument(
        "--chunk-size", type=int, default=256, help="records of a class per Beam work item"
    )
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda")
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch threads per worker (default 1: scale with --direct_num_workers; 0: torch's "
        "default)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress lines")
    pre = parser.add_argument_group("pre-training (with --pretrain)")
    pre.add_argument(
        "--pretrain-epochs",
        type=finite_float,
        default=None,
        help="passes over all images (default 1)",
    )
    pre.add_argument("--pretrain-steps", type=int, default=None, help="training batches")
    pre.add_argument("--pretrain-batch-size", type=int, default=64)
    pre.add_argument("--pretrain-lr", type=finite_float, default=1e-3)
    pre.add_argument(
        "--image-size",
        type=int,
        default=None,
        metavar="N",
        help="image side in pixels: images are resized to N x N (default 84)",
    )
    pre.add_argument("--width", type=finite_float, default=1.0, help="backbone channel multiplier")
    pre.add_argument("--seed", type=int, default=0, help="random seed of the pre-training")
    pre.add_argument(
        "--checkpoint-out",
        default=None,
        help="run folder of the pre-training (default: the output with .checkpoint for .npz)",
    )
    add_runner_arguments(parser)
    return parser


def pretrain_config_from_args(args: argparse.Namespace) -> Any:
    """Validate the --pretrain options (or refuse them without --pretrain)."""
    from learners.nn.backbones import canonical_backbone_name
    from splits.embeddings.pretrain import PretrainConfig

    pretrain_only = {
        "--pretrain-epochs": args.pretrain_epochs is not None,
        "--pretrain-steps": args.pretrain_steps is not None,
        "--image-size": args.image_size is not None,
        "--checkpoint-out": args.checkpoint_out is not None,
        "--width": args.width != 1.0,
    }
    if args.model is not None and args.pretrain is not None:
        raise EmbedError("give --model CHECKPOINT or --pretrain BACKBONE, not both")
    if args.model is None and args.pretrain is None:
        raise EmbedError("give --model CHECKPOINT (a learners checkpoint) or --pretrain BACKBONE")
    if args.pretrain is None:
        given = [flag for flag, used in pretrain_only.items() if used]
        if given:
            raise EmbedError(
                f"{', '.join(given)} apply to --pretrain; a --model checkpoint fixes its backbone "
                "and image size"
            )
        return None
    try:
        backbone = canonical_backbone_name(args.pretrain)
        return PretrainConfig(
            backbone=backbone,
            image_size=84 if args.image_size is None else args.image_size,
            width=args.width,
            steps=args.pretrain_steps,
            epochs=args.pretrain_epochs,
            batch_size=args.pretrain_batch_size,
            lr=args.pretrain_lr,
            seed=args.seed,
            device=args.device,
            progress=not args.no_progress,
        )
    except ValueError as exc:
        raise EmbedError(
            str(exc).replace("unknown backbone", "--pretrain: unknown backbone")
        ) from None


@user_faults
def main(argv: Sequence[str] | None = None) -> int:
    from learners.training.device import resolve_device

    args, beam_args = build_parser().parse_known_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    dataset = single_dataset(args.dataset)
    pretrain_config = pretrain_config_from_args(args)
    options = EmbedOptions(
        batch_size=args.batch_size,
        chunk_size=args.chunk_size,
        device=args.device,
        torch_threads=args.torch_threads,
        progress=not args.no_progress,
    )
    try:
        resolve_device(args.device)
    except ValueError as exc:  # learners' check of --device (a ValueError there, not a bug)
        raise EmbedError(str(exc)) from None
    output = check_output(args.output, args.overwrite)
    run_dir_flag = ("--checkpoint-out", args.checkpoint_out)
    inputs = [("--dataset", dataset), ("--model", args.model)]
    refuse_overlap(("--output", args.output), inputs)
    refuse_overlap(run_dir_flag, inputs)
    runner = make_runner(args, beam_args)
    if storage_paths.is_remote(dataset):  # read by the workers where it lies
        if pretrain_config is not None:
            raise EmbedError(
                f"--pretrain trains on a local folder; copy --dataset {dataset} first with "
                f"`python -m episodes.fetch --dataset {dataset} --output LOCAL_FOLDER`, or give "
                "--model CHECKPOINT"
            )
        storage_paths.use_options(runner.options)
        runner.check_storage(dataset)
    check_dataset(dataset)
    checkpoint = args.model
    if pretrain_config is not None:
        from splits.embeddings.pretrain import pretrain

        if args.checkpoint_out is None and not isinstance(output, Path):
            raise EmbedError(
                f"--output {output} is in object storage: give --checkpoint-out LOCAL_FOLDER "
                "for the pre-training run"
            )
        run_dir = Path(args.checkpoint_out or output.with_suffix(".checkpoint"))
        try:
            checkpoint = pretrain(dataset, run_dir, pretrain_config)
        except UserError as exc:  # a learners fault (damaged checkpoint, diverged loss)
            raise EmbedError(f"--pretrain in {run_dir} (--checkpoint-out): {exc}") from None
        print(f"pre-trained {pretrain_config.backbone}: checkpoint {checkpoint}")
    else:
        from splits.embeddings.feature_extractor import CheckpointError, resolve_checkpoint

        try:
            resolve_checkpoint(checkpoint)
        except CheckpointError as exc:
            raise EmbedError(str(exc)) from None
    report = embed_dataset(
        dataset, checkpoint, output, runner, options, args.direct_num_workers, exit_on_ctrl_c=True
    )
    print(report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
