"""`python -m episodes.read`: sample and read episodes of converted datasets, print a summary
of each (and optionally a picture and statistics).

This module is the command only. The library it used to hold lives in `episodes.sampling`
(`episode`: the Episode types; `sampler_factory`: specs, split files, samplers; `episode_cli`:
the arguments shared with `python -m beam_pipelines.episodes`) and `episodes.reading.reader`
(EpisodeReader). Those names still import from here until version 0.3.0, with a
DeprecationWarning; this module reaches them through their modules, so that every such import
warns.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from episodes.images.image_decode import DEFAULT_RESIZE, RESIZE_MODES
from episodes.reading import reader as episode_reader
from episodes.records.dataset_spec import DatasetSpec
from episodes.sampling import episode_cli
from episodes.sampling.episode import EpisodeDescription
from episodes.util.cli_errors import UserError, run_main
from episodes.util.cli_style import command_parser
from episodes.util.moved_modules import moved_names
from episodes.util.progress_lines import ProgressLines

__all__ = ["build_parser", "format_episode", "format_statistics", "main"]

__getattr__ = moved_names(
    __name__,
    {
        **dict.fromkeys(("ARRAY_FIELDS", "Episode", "episode_labels"), "episodes.sampling.episode"),
        **dict.fromkeys(
            ("CACHE_MODES", "DTYPES", "POOL_GATHER_BYTES", "EpisodeReader"),
            "episodes.reading.reader",
        ),
        "ReaderError": "episodes.records.reader_errors",
        "add_mixing_arguments": "episodes.sampling.episode_cli:add_sampling_mode_arguments",
        **dict.fromkeys(
            (
                "add_episode_source_arguments",
                "add_sampler_arguments",
                "describe_config",
                "sampler_config_from_args",
            ),
            "episodes.sampling.episode_cli",
        ),
        **dict.fromkeys(
            ("load_dataset", "make_sampler", "read_split_file"), "episodes.sampling.sampler_factory"
        ),
    },
)


def format_episode(description: EpisodeDescription, spec: DatasetSpec) -> str:
    """Readable summary of one episode: ways, shots per class, query size, class names."""
    lines = [
        f"episode {description.episode_index}  source={description.source}  "
        f"split={description.split.value}  ways={description.ways}  "
        f"support={description.support_size}  query={description.query_size}",
        f"  {'label':>5}  {'class':>6}  {'shots':>5}  {'query':>5}  name",
    ]
    for label, (class_id, support, query) in enumerate(
        zip(description.class_ids, description.support, description.query)
    ):
        lines.append(
            f"  {label:>5}  {class_id:>6}  {len(support):>5}  {len(query):>5}  "
            f"{spec.class_names[class_id]}"
        )
    return "\n".join(lines)


def format_statistics(stats: Any, prefix: str = "") -> list[str]:
    """Flatten a (nested) statistics dict into aligned 'key: value' lines."""
    lines: list[str] = []
    if isinstance(stats, dict):
        for key, value in stats.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict) and all(not isinstance(v, dict) for v in value.values()):
                parts = [f"{k}={_fmt(v)}" for k, v in value.items()]
                lines.append(f"{name:<24} " + "  ".join(parts))
            elif isinstance(value, dict):
                lines.extend(format_statistics(value, prefix=f"{name}."))
            else:
                lines.append(f"{name:<24} {_fmt(value)}")
    else:
        lines.append(f"{prefix}{_fmt(stats)}")
    return lines


def _fmt(value: Any) -> str:
    if isinstance(value, float | np.floating):
        return f"{int(value)}" if float(value).is_integer() else f"{value:.2f}"
    if isinstance(value, list | tuple) and len(value) > 12:
        return f"[{', '.join(_fmt(v) for v in value[:12])}, ...] ({len(value)} values)"
    return str(value)


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "episodes.read",
        "Sample and read episodes of converted datasets; print a summary of each.",
    )
    episode_cli.add_episode_source_arguments(parser)
    parser.add_argument(
        "--split-file",
        help="split JSON (train/valid/test class names) overriding the spec's splits",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="random seed of the episodes (default 0)"
    )
    parser.add_argument(
        "--episodes", type=int, default=5, help="number of episodes to read and print"
    )
    parser.add_argument("--start", type=int, default=0, help="first episode index")
    parser.add_argument(
        "--image-size",
        type=int,
        default=84,
        metavar="N",
        help="image side in pixels: episode images are resized to N x N (default 84)",
    )
    parser.add_argument(
        "--dtype",
        default="uint8",
        choices=sorted(episode_reader.DTYPES),
        help="numpy dtype of the episode arrays: uint8 pixels, or float32 scaled to [0, 1] "
        "(default uint8)",
    )
    parser.add_argument("--threads", type=int, default=2, help="decoding threads (0: inline)")
    parser.add_argument(
        "--decode-processes",
        type=int,
        default=None,
        metavar="N",
        help="decode records in N worker processes (default: one per core, at most 8, where "
        "the platform allows; 0 decodes in this process)",
    )
    parser.add_argument(
        "--decode-device",
        default="cpu",
        choices=episode_reader.DECODE_DEVICES,
        help="cuda: decode JPEG records on the GPU (nvJPEG, opt-in; pixels differ slightly from "
        'the reference decoder\'s, docs/operations.md, "Feeding a GPU")',
    )
    parser.add_argument(
        "--resize",
        default=DEFAULT_RESIZE,
        choices=RESIZE_MODES,
        help="resampling method: reference, Meta-Dataset's TF bilinear (align_corners), the "
        "default; antialias, Pillow's antialiased bilinear after JPEG DCT reduction (faster for "
        "large images)",
    )
    parser.add_argument("--decoded-cache", default="auto", choices=episode_reader.CACHE_MODES)
    parser.add_argument("--cache-root", help="folder holding decoded caches, if not in dataset")
    parser.add_argument(
        "--index-cache-dir",
        help="where to keep built .index files when the dataset folder is read-only",
    )
    parser.add_argument(
        "--save-grid",
        metavar="FILE.png",
        help="write a picture of one episode's support and query images",
    )
    parser.add_argument(
        "--grid-episode",
        type=int,
        default=None,
        help="episode index for --save-grid (default: --start)",
    )
    parser.add_argument(
        "--stats",
        type=int,
        default=0,
        metavar="N",
        help="print distribution statistics of N episode descriptions",
    )
    episode_cli.add_sampler_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.episodes < 0 or args.stats < 0 or args.start < 0:
        raise UserError("--episodes, --stats and --start must be >= 0")
    if args.decode_device != "cpu":  # before any dataset is read
        from episodes.images.gpu_decode import gpu_decode_problem

        why_not = gpu_decode_problem(args.decode_device)
        if why_not is not None:
            raise UserError(f"--decode-device {args.decode_device}: {why_not}")
        if args.decode_processes:
            raise UserError(
                f"--decode-processes {args.decode_processes} decodes on the CPU; "
                f"--decode-device {args.decode_device} decodes in this process on the GPU"
            )
    config = episode_cli.sampler_config_from_args(args)
    sampling = episode_cli.sampling_mode_from_args(args)
    reader = episode_reader.EpisodeReader(
        args.dataset,
        args.split,
        config,
        args.seed,
        image_size=args.image_size,
        dtype=args.dtype,
        num_threads=args.threads,
        decode_processes=args.decode_processes,
        decode_device=args.decode_device,
        resize=args.resize,
        decoded_cache=args.decoded_cache,
        cache_root=args.cache_root,
        index_cache_dir=args.index_cache_dir,
        split_file=args.split_file,
        sampling=sampling,
    )
    with reader:
        print(
            f"datasets: {', '.join(f'{s.name} ({s.root})' for s in reader.specs)}  "
            f"split={reader.split.value}  seed={args.seed}  "
            f"decoded cache: {'yes' if reader.uses_decoded_cache else 'no'}"
        )
        kind = getattr(reader.sampler, "hierarchy_kind", None)
        print(
            f"sampler: {episode_cli.describe_config(config)}"
            + (f"  hierarchy: {kind}" if kind else "")
        )
        for spec in reader.specs:
            if spec.hierarchy_note:
                print(f"note: {spec.hierarchy_note}", file=sys.stderr)
        t0 = time.perf_counter()
        for episode_index in range(args.start, args.start + args.episodes):
            description = reader.describe(episode_index)
            tic = time.perf_counter()
            episode = reader.read(description)
            took = (time.perf_counter() - tic) * 1e3
            print(format_episode(description, reader.spec(description.source)))
            print(
                f"  arrays: support {episode.support_images.shape} query "
                f"{episode.query_images.shape} {episode.support_images.dtype}  "
                f"read in {took:.1f} ms"
            )
        if args.episodes:
            rate = args.episodes / max(time.perf_counter() - t0, 1e-9)
            print(f"{args.episodes} episodes ({rate:.1f} episodes/s including printing)")
        if args.save_grid:
            from episodes.reading.episode_grid import save_episode_grid

            index = args.start if args.grid_episode is None else args.grid_episode
            path = save_episode_grid(reader.episode(index), args.save_grid)
            print(f"wrote {path} (episode {index})")
        if args.stats:
            _print_stats(reader, args.start, args.stats)
    return 0


def _print_stats(reader: episode_reader.EpisodeReader, start: int, count: int) -> None:
    """Statistics of `count` descriptions, accumulated as they are sampled (constant memory)."""
    from episodes.sampling.episode_stats import episode_statistics

    bar = ProgressLines("stats", count, "descriptions")

    def described():
        for i in range(start, start + count):
            yield reader.describe(i)
            bar.advance()

    t0 = time.perf_counter()
    stats = episode_statistics(described())
    took = max(time.perf_counter() - t0, 1e-9)
    print(f"statistics of {count} episodes (described in {took:.2f} s, {count / took:.0f}/s):")
    for line in format_statistics(stats):
        print("  " + line)


if __name__ == "__main__":
    sys.exit(run_main(main))
