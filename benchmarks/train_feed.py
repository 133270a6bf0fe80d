"""How long the training loop waits for data, with and without background loading.

    python -m benchmarks.train_feed [--steps 5] [--rounds 2] [--workers 2] [--json FILE]
    python -m benchmarks.train_feed --multiclass [--batch-size 64] [--rounds 3]
    python -m benchmarks.train_feed --device cuda --backbone resnet12 --width 1 --query 15 \
        --amp bf16 --channels-last --steps 40 --rounds 3 --workers 4 --decode-processes 4

Data: synthetic JPEG records (20 classes x 40 images of 224x224, decoded and resized to 84x84
like ImageNet's records in Meta-Dataset), and the same records with a decoded 84x84 cache.
Loading modes: inline (the training process reads: no background loading), DataLoader workers
(`--loader-workers`), and for records the reader's decode processes (`--decode-processes`).
Steps of known cost, each through the real feed and training loop:
1. ProtoNet on a real backbone through `learners.train.train`, the users' path (by default
   CNN4 at width 0.25 on fixed 5-way 5-shot 5-query episodes, small enough for a shared CPU);
2. a stand-in accelerator step: the host converts the episode to tensors, then idles for
   `--stand-in-ms` as it does while a GPU computes (so loading competes for no CPU).
Reported per mode: the share of the loop's wall time spent waiting for the next episode (steps
2..N-1: the first step's wait is the workers' start-up, reported apart; the last step saves
the checkpoint), the step time, and the loading rate alone. Modes run interleaved, `--rounds`
times; the tables give ranges over rounds (the machine may be shared).
Target: waiting < 5% of step time wherever the loading rate exceeds the step rate.
3. A scaling table (`--scaling-max N`, default: this machine's usable cores): the loading rate
   alone with 1..N decode processes and 1..N DataLoader workers, against inline reading.
On CUDA, the GPU's mean utilisation during each real-backbone run (NVML through `pynvml`
when installed, else `nvidia-smi`) is reported next to the wait share, and `--decode-device
cuda` adds GPU JPEG decoding's loading rate and its pixels' mean and max |difference| from
the reference decoder's on the same episodes.
`--multiclass` measures multiclass pre-training's batch feed instead: batches/s alone of inline
reading, the reader's decode processes (reading ahead, and one batch at a time as before),
DataLoader workers and the decoded cache, with each one's ratio to inline reading in the same
round.
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
import functools  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from dataclasses import dataclass, replace  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.synthetic_dataset import write_jpeg_dataset  # noqa: E402
from episodes.images.decoded_cache import write_decoded_cache  # noqa: E402
from episodes.records.dataset_spec import Split, load_spec  # noqa: E402
from learners.feed.episode_feed import FeedConfig, feed  # noqa: E402
from learners.feed.episode_source import (  # noqa: E402
    EpisodeOptions,
    open_batch_source,
    open_episode_source,
)
from learners.methods.learner_config import LearnerConfig  # noqa: E402
from learners.methods.protonet import ProtoNet  # noqa: E402
from learners.methods.registry import build_learner, learner_config  # noqa: E402
from learners.train import train  # noqa: E402
from learners.training.run_dir import RunConfig  # noqa: E402
from learners.training.training_loop import LoopConfig, LoopResult, run_training  # noqa: E402

IMAGE_SIZE = 84


@dataclass(frozen=True)
class Mode:
    name: str
    data: str  # "records" or "cache"
    loader_workers: int = 0
    decode_processes: int = 0

    @property
    def background(self) -> bool:
        return self.loader_workers > 0 or self.decode_processes > 0


class GpuUtilisation:
    """Mean utilisation (%) of a CUDA device, sampled every `period` s in a thread while in a
    `with` block: NVML through `pynvml` (nvidia-ml-py) when installed, else `nvidia-smi`.
    `mean` is None off CUDA, or where neither is at hand."""

    def __init__(self, device: torch.device, period: float = 0.2):
        self.device = device
        self.period = period
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._read = self._reader() if device.type == "cuda" else None

    def _reader(self):
        index = self.device.index if self.device.index is not None else 0
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            return lambda: float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except Exception:  # no pynvml, or no NVML library: try nvidia-smi
            pass
        command = [
            "nvidia-smi",
            "--query-gpu=utilization.gpu",
            "--format=csv,noheader,nounits",
            f"--id={index}",
        ]

        def smi() -> float:
            out = subprocess.run(command, capture_output=True, text=True, timeout=5, check=True)
            return float(out.stdout.strip().splitlines()[0])

        try:
            smi()
        except Exception:
            return None
        return smi

    def _sample(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.samples.append(self._read())
            except Exception:
                return

    def __enter__(self) -> GpuUtilisation:
        if self._read is not None:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.samples)) if self.samples else None


def make_datasets(
    workdir: Path, side: int, classes: int = 20, per_class: int = 40
) -> dict[str, Path]:
    """JPEG records (every class in the train split), and a copy with a decoded 84x84 cache."""
    records = workdir / "records"
    write_jpeg_dataset(records, "bench_train", Split.TRAIN, classes, per_class, side)
    cached = workdir / "cached"
    shutil.copytree(records, cached)
    write_decoded_cache(load_spec(cached), IMAGE_SIZE)
    return {"records": records, "cache": cached}


def episode_options(args: argparse.Namespace) -> EpisodeOptions:
    return EpisodeOptions(ways=5, shots=5, query=args.query, image_size=IMAGE_SIZE)


def run_config(args: argparse.Namespace, dataset: Path, mode: Mode) -> RunConfig:
    learner = learner_config(
        "protonet", backbone=args.backbone, image_size=IMAGE_SIZE, width=args.width
    )
    return RunConfig(
        learner=learner,
        dataset=str(dataset),
        split_file=None,
        episode_options=episode_options(args),
        seed=0,
        total_steps=args.steps,
        checkpoint_every=args.steps,
        validation_episodes=0,
        loader_workers=mode.loader_workers,
        decode_processes=mode.decode_processes,
        amp=args.amp,
        channels_last=args.channels_last,
    )


def shares(result: LoopResult) -> dict:
    """The wait share over steps 2..N-1 (the first waits for the workers' start-up, the last
    saves the checkpoint), the median step time without waiting, the first step's wait."""
    waits, times = result.data_waits[1:-1], result.step_times[1:-1]
    return {
        "wait_share": sum(waits) / sum(times),
        "step_s": float(np.median(np.asarray(times) - np.asarray(waits))),
        "first_wait_s": result.data_waits[0],
    }


def train_once(args: argparse.Namespace, dataset: Path, mode: Mode, out: Path) -> dict:
    """One short run of the real backbone through `learners.train.train` (and the GPU's mean
    utilisation meanwhile, on CUDA)."""
    with GpuUtilisation(torch.device(args.device)) as gpu:
        result = train(run_config(args, dataset, mode), str(out), args.device, progress=False)
    shutil.rmtree(out)
    return {**shares(result), "gpu_utilisation": gpu.mean}


class StandInStep(ProtoNet):
    """An accelerator's step as the host sees it: the episode is converted to tensors (the
    host's share), then the host idles for `seconds` while the device would compute."""

    def __init__(self, config: LearnerConfig, seconds: float):
        super().__init__(config)
        self.seconds = seconds

    def train_step(self, item: Any) -> float:
        self.to_tensors(item)
        time.sleep(self.seconds)
        return 0.0


def stand_in_once(args: argparse.Namespace, dataset: Path, mode: Mode, out: Path) -> dict:
    """The same feed and loop with a stand-in accelerator step of `--stand-in-ms`."""
    config = run_config(args, dataset, mode)
    learner = StandInStep(replace(config.learner, width=0.25), args.stand_in_ms / 1000)
    options = episode_options(args)
    opener = functools.partial(open_episode_source, str(dataset), "train", None, options, 0)
    source = opener(decode_processes=mode.decode_processes)
    feed_config = FeedConfig(mode.loader_workers)
    try:
        result = run_training(
            learner,
            lambda start: feed(source, opener, start, feed_config, torch.device("cpu")),
            out,
            LoopConfig(args.stand_in_steps, args.stand_in_steps, progress=False),
        )
    finally:
        source.close()
    shutil.rmtree(out)
    return shares(result)


def timed_items(items: Iterator, count: int) -> tuple[float, float]:
    """(wall s, this process's CPU s) of `count` items after the first (start-up excluded);
    closes `items`."""
    next(items)
    t0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(count):
        next(items)
    took, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    items.close()
    return took, cpu


def loading_rate(
    args: argparse.Namespace, dataset: Path, mode: Mode, device: torch.device
) -> float:
    """Episodes/s the mode's feed delivers with nothing else to do (start-up excluded)."""
    options = episode_options(args)
    opener = functools.partial(open_episode_source, str(dataset), "train", None, options, 0)
    source = opener(decode_processes=mode.decode_processes)
    try:
        items = feed(source, opener, 0, FeedConfig(mode.loader_workers), device)
        took, _ = timed_items(items, args.rate_episodes)
    finally:
        source.close()
    return args.rate_episodes / took


def scaling_counts(most: int) -> list[int]:
    """1..most in the steps a table can show: 1, 2, 4, 6, 8, 12, 16, 24, 32 and `most`."""
    return sorted({c for c in (1, 2, 4, 6, 8, 12, 16, 24, 32) if c <= most} | {most})


def scaling_table(args: argparse.Namespace, dataset: Path, device: torch.device) -> dict:
    """Loading rate alone of inline reading, and of 1..N decode processes and loader workers."""
    out: dict = {"inline": loading_rate(args, dataset, Mode("inline", "records"), device)}
    for count in scaling_counts(args.scaling_max):
        print(f"scaling: {count} processes / workers", flush=True)
        for kind, mode in (
            ("decode_processes", Mode("d", "records", decode_processes=count)),
            ("loader_workers", Mode("w", "records", loader_workers=count)),
        ):
            out.setdefault(kind, {})[str(count)] = loading_rate(args, dataset, mode, device)
    return out


def batch_rate(
    args: argparse.Namespace, dataset: Path, mode: Mode, device: torch.device
) -> tuple[float, float]:
    """(multiclass batches/s the mode's feed delivers alone, the training process's CPU ms per
    batch), start-up excluded; mode name "one at a time" reads `batch(i)` after `batch(i)` (no
    read-ahead: the path before)."""
    options = episode_options(args)
    opener = functools.partial(open_batch_source, str(dataset), None, args.batch_size, options, 0)
    source = opener(decode_processes=mode.decode_processes)
    # benchmark hook (as benchmarks/episodes.py): decode workers sleep MS per image instead
    source.reader._emulate_decode_s = args.emulate_decode_ms / 1000
    try:
        if mode.name.endswith("one at a time"):
            items = (source.batch(i) for i in itertools.count())
        else:
            items = feed(source, opener, 0, FeedConfig(mode.loader_workers), device)
        took, cpu = timed_items(items, args.rate_batches)
    finally:
        source.close()
    return args.rate_batches / took, 1000 * cpu / args.rate_batches


def multiclass_modes(args: argparse.Namespace) -> list[Mode]:
    w, d = args.workers, args.decode_processes
    if args.emulate_decode_ms > 0:  # only decode processes emulate; the baseline is the first
        return [
            Mode(f"{d} decode processes, one at a time", "records", decode_processes=d),
            Mode(f"{d} decode processes", "records", decode_processes=d),
        ]
    return [
        Mode("inline", "records"),
        Mode(f"{d} decode processes, one at a time", "records", decode_processes=d),
        Mode(f"{d} decode processes", "records", decode_processes=d),
        Mode(f"{w} loader workers", "records", loader_workers=w),
        Mode("decoded cache, inline", "cache"),
    ]


def measure_multiclass(args: argparse.Namespace, workdir: Path) -> dict:
    """Multiclass pre-training's feed: batches/s of each loading, `--rounds` interleaved."""
    device = torch.device(args.device)
    datasets = make_datasets(workdir, args.record_size)
    results: dict = {
        "device": str(device),
        "record_size": args.record_size,
        "batch_size": args.batch_size,
        "rate_batches": args.rate_batches,
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg()[0],
        "emulate_decode_ms": args.emulate_decode_ms,
        "batch_rates": {m.name: [] for m in multiclass_modes(args)},
        "parent_cpu_ms_per_batch": {m.name: [] for m in multiclass_modes(args)},
    }
    for round_index in range(args.rounds):
        for mode in multiclass_modes(args):
            print(f"round {round_index + 1}/{args.rounds}: {mode.name}", flush=True)
            rate, cpu_ms = batch_rate(args, datasets[mode.data], mode, device)
            results["batch_rates"][mode.name].append(rate)
            results["parent_cpu_ms_per_batch"][mode.name].append(cpu_ms)
    results["load_average_at_end"] = os.getloadavg()[0]
    return results


def multiclass_lines(results: dict) -> list[str]:
    """Per loading: batches/s over the rounds and the ratio to inline reading in each round."""
    size = results["record_size"]
    baseline = next(iter(results["batch_rates"]))
    emulated = results["emulate_decode_ms"]
    lines = [
        f"multiclass feed benchmark on {results['device']}: batches of {results['batch_size']} "
        f"images at 84x84 from {size}x{size} JPEG records, {results['rate_batches']} batches "
        f"a rate, {results['rounds']} interleaved rounds; {results['cpus']} CPUs, load "
        f"average {results['load_average_at_start']:.1f} -> {results['load_average_at_end']:.1f}"
        + (f"; decode emulated: workers sleep {emulated:g} ms an image" if emulated else ""),
        "",
        f"| loading | batches/s | ratio to {baseline} (same round) | training process CPU "
        "ms/batch |",
        "| --- | --- | --- | --- |",
    ]
    for name, rates in results["batch_rates"].items():
        ratios = [rate / base for rate, base in zip(rates, results["batch_rates"][baseline])]
        cpu = results["parent_cpu_ms_per_batch"][name]
        lines.append(
            f"| {name} | {_range(rates, '.2f')} | {_range(ratios, '.2f')}x | {_range(cpu, '.1f')} |"
        )
    return lines


class GpuDecodedSource:
    """Episodes of a dataset folder decoded on the GPU (`EpisodeReader(decode_device="cuda")`),
    with the items interface of `learners.feed.episode_source`."""

    random_access = True

    def __init__(self, dataset: Path, options: Any, decode_device: str = "cuda"):
        from episodes import EpisodeReader, SamplerConfig

        config = SamplerConfig.fixed(options.ways, options.shots, options.query)
        self.reader = EpisodeReader(
            dataset, "train", config, 0, image_size=IMAGE_SIZE, decode_device=decode_device
        )

    def items(self, indices):
        return self.reader.read_many(self.reader.describe(i) for i in indices)

    def close(self) -> None:
        self.reader.close()


def gpu_decode_numbers(args: argparse.Namespace, dataset: Path, device: torch.device) -> dict:
    """GPU decoding: its loading rate alone against inline CPU decoding's (the baseline,
    measured here), and its pixels against the reference decoder's on the same episodes (mean
    and max |difference|, in 0..255 levels)."""
    from episodes import EpisodeReader, SamplerConfig

    options = episode_options(args)
    baseline = loading_rate(args, dataset, Mode("inline", "records"), device)
    source = GpuDecodedSource(dataset, options)
    try:
        items = feed(source, lambda: source, 0, FeedConfig(0), device)
        rate = args.rate_episodes / timed_items(items, args.rate_episodes)[0]
        config = SamplerConfig.fixed(options.ways, options.shots, options.query)
        with EpisodeReader(
            dataset, "train", config, 0, image_size=IMAGE_SIZE, decode_processes=0
        ) as reference:
            diffs = []
            for a, b in zip(reference.episodes(0, 4), source.reader.episodes(0, 4)):
                for x, y in (
                    (a.support_images, b.support_images),
                    (a.query_images, b.query_images),
                ):
                    diffs.append(np.abs(y.cpu().numpy().astype(np.int16) - x).ravel())
        diff = np.concatenate(diffs)
    finally:
        source.close()
    return {
        "loading_rate": rate,
        "inline_cpu_loading_rate": baseline,
        "mean_abs_diff": float(diff.mean()),
        "max_abs_diff": int(diff.max()),
        "share_equal": float(np.mean(diff == 0)),
    }


def compute_only_step(args: argparse.Namespace, device: torch.device) -> float:
    """Median seconds of one training step on episodes already in memory (no loading)."""
    torch.manual_seed(0)
    learner = build_learner(run_config(args, Path("."), Mode("x", "records")).learner).to(device)
    learner.set_precision(args.amp, args.channels_last)
    source = open_episode_source("synthetic", "train", None, episode_options(args), 0)
    episodes = [source.episode(i) for i in range(3)]
    learner.train_step(episodes[0])  # warm-up
    times = []
    for episode in episodes:
        t0 = time.perf_counter()
        learner.train_step(episode)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def modes(args: argparse.Namespace) -> list[Mode]:
    w, d = args.workers, args.decode_processes
    return [
        Mode("records, inline", "records"),
        Mode(f"records, {w} loader workers", "records", loader_workers=w),
        Mode(f"records, {d} decode processes", "records", decode_processes=d),
        Mode("decoded cache, inline", "cache"),
        Mode(f"decoded cache, {w} loader workers", "cache", loader_workers=w),
    ]


def measure(args: argparse.Namespace, workdir: Path) -> dict:
    device = torch.device(args.device)
    datasets = make_datasets(workdir, args.record_size)
    results: dict = {
        "device": str(device),
        "backbone": args.backbone,
        "width": args.width,
        "record_size": args.record_size,
        "query": args.query,
        "amp": args.amp,
        "channels_last": args.channels_last,
        "steps": args.steps,
        "stand_in_ms": args.stand_in_ms,
        "stand_in_steps": args.stand_in_steps,
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": os.getloadavg()[0],
        "compute_only_step_s": [],
        "modes": {
            m.name: {"loading_rate": [], "backbone": [], "stand_in": []} for m in modes(args)
        },
    }
    for round_index in range(args.rounds):
        results["compute_only_step_s"].append(compute_only_step(args, device))
        for mode in modes(args):
            print(f"round {round_index + 1}/{args.rounds}: {mode.name}", flush=True)
            entry = results["modes"][mode.name]
            dataset = datasets[mode.data]
            entry["loading_rate"].append(loading_rate(args, dataset, mode, device))
            entry["backbone"].append(train_once(args, dataset, mode, workdir / "run"))
            if args.stand_in_ms > 0:
                entry["stand_in"].append(stand_in_once(args, dataset, mode, workdir / "run"))
    if args.scaling_max > 0:
        results["scaling"] = scaling_table(args, datasets["records"], device)
    if args.decode_device == "cuda":
        results["gpu_decode"] = gpu_decode_numbers(args, datasets["records"], device)
    results["load_average_at_end"] = os.getloadavg()[0]
    return results


def _range(values: list[float], fmt: str) -> str:
    low, high = format(min(values), fmt), format(max(values), fmt)
    return low if low == high else f"{low}-{high}"


def table(results: dict, kind: str, title: str) -> list[str]:
    gpu = any(
        r.get("gpu_utilisation") is not None for e in results["modes"].values() for r in e[kind]
    )
    lines = [
        "",
        title,
        "",
        "| loading | waiting for data (share of wall time) | step s, median | "
        "first-step wait s | loading alone, episodes/s | loading rate / step rate |"
        + (" GPU utilisation, mean |" if gpu else ""),
        "| --- | --- | --- | --- | --- | --- |" + (" --- |" if gpu else ""),
    ]
    for name, entry in results["modes"].items():
        runs = entry[kind]
        if not runs:
            return []
        steps = [r["step_s"] for r in runs]
        rates = entry["loading_rate"]
        busy = [r["gpu_utilisation"] for r in runs if r.get("gpu_utilisation") is not None]
        lines.append(
            f"| {name} | {_range([100 * r['wait_share'] for r in runs], '.1f')}% | "
            f"{np.median(steps):.3f} | {_range([r['first_wait_s'] for r in runs], '.2f')} | "
            f"{_range(rates, '.0f')} | "
            f"{_range([rate * step for rate, step in zip(rates, steps)], '.1f')} |"
            + ((f" {_range(busy, '.0f')}% |" if busy else " - |") if gpu else "")
        )
    return lines


def scaling_lines(results: dict) -> list[str]:
    scaling = results.get("scaling")
    if not scaling:
        return gpu_decode_lines(results)
    inline = scaling["inline"]
    lines = [
        "",
        f"3. loading alone, episodes/s (ratio to inline reading, {inline:.1f} episodes/s), "
        f"on {results['cpus']} CPUs",
        "",
        "| processes / workers | decode processes | DataLoader workers |",
        "| --- | --- | --- |",
    ]
    for count, rate in scaling["decode_processes"].items():
        workers = scaling["loader_workers"][count]
        lines.append(
            f"| {count} | {rate:.1f} ({rate / inline:.2f}x) | {workers:.1f} "
            f"({workers / inline:.2f}x) |"
        )
    return lines + gpu_decode_lines(results)


def gpu_decode_lines(results: dict) -> list[str]:
    """GPU decoding's loading rate as a ratio to inline CPU decoding's, and its pixels."""
    gpu = results.get("gpu_decode")
    if not gpu:
        return []
    base = gpu["inline_cpu_loading_rate"]
    return [
        "",
        f"GPU JPEG decoding (--decode-device cuda): {gpu['loading_rate']:.1f} episodes/s, "
        f"{gpu['loading_rate'] / base:.2f}x inline CPU decoding ({base:.1f} episodes/s); "
        f"pixels against the reference decoder: mean |diff| {gpu['mean_abs_diff']:.3f}, "
        f"max |diff| {gpu['max_abs_diff']}, equal {100 * gpu['share_equal']:.1f}%",
    ]


def report_lines(results: dict) -> list[str]:
    compute = results["compute_only_step_s"]
    size = results["record_size"]
    lines = [
        f"training feed benchmark on {results['device']}: ProtoNet {results['backbone']} "
        f"(width {results['width']}), 5-way 5-shot {results['query']}-query episodes at 84x84 "
        f"from {size}x{size} JPEG records, amp {results['amp']}"
        f"{', channels_last' if results['channels_last'] else ''}; {results['rounds']} "
        f"interleaved rounds; {results['cpus']} CPUs ({results['torch_threads']} torch "
        f"threads), load average {results['load_average_at_start']:.1f} -> "
        f"{results['load_average_at_end']:.1f}",
    ]
    lines += table(
        results,
        "backbone",
        f"1. the real backbone, {results['steps']} steps a run (step on episodes in memory: "
        f"{_range(compute, '.3f')} s)",
    )
    lines += table(
        results,
        "stand_in",
        f"2. a stand-in accelerator step: the host converts the episode, then idles "
        f"{results['stand_in_ms']:.0f} ms; {results['stand_in_steps']} steps a run",
    )
    lines += scaling_lines(results)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--backbone", default="cnn4", help="the step's backbone (resnet12 ...)")
    parser.add_argument("--width", type=float, default=0.25, help="backbone channel multiplier")
    parser.add_argument("--query", type=int, default=5, help="query images per class")
    parser.add_argument("--record-size", type=int, default=224, help="side of the JPEG records")
    parser.add_argument("--amp", choices=("off", "bf16", "fp16"), default="off")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--steps", type=int, default=5, help="real steps per run (>= 4)")
    parser.add_argument(
        "--stand-in-ms", type=float, default=50.0, help="stand-in accelerator step (0: none)"
    )
    parser.add_argument("--stand-in-steps", type=int, default=20, help="stand-in steps per run")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved repetitions")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    parser.add_argument("--decode-processes", type=int, default=2)
    parser.add_argument("--rate-episodes", type=int, default=8, help="episodes per rate")
    parser.add_argument(
        "--scaling-max",
        type=int,
        default=None,
        help="scaling table up to N processes / workers (default: usable cores; 0: none)",
    )
    parser.add_argument(
        "--decode-device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cuda: also measure GPU JPEG decoding (rate, pixel differences)",
    )
    parser.add_argument(
        "--multiclass",
        action="store_true",
        help="measure multiclass pre-training's batch feed instead (batches/s per loading)",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="--multiclass batch size")
    parser.add_argument("--rate-batches", type=int, default=8, help="--multiclass: batches a rate")
    parser.add_argument(
        "--emulate-decode-ms",
        type=float,
        default=0.0,
        help="--multiclass: decode processes sleep MS per image instead of decoding (sleep "
        "uses no CPU: N processes on 2 cores behave like N cores); compares reading ahead "
        "with one batch at a time",
    )
    parser.add_argument("--json", help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)
    if min(args.steps, args.stand_in_steps) < 4 or args.rounds < 1:
        parser.error("--steps and --stand-in-steps must be >= 4, --rounds >= 1")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: CUDA is not available on this machine")
    if args.scaling_max is None:
        args.scaling_max = len(os.sched_getaffinity(0))
    if args.decode_device == "cuda":
        from episodes.images.gpu_decode import gpu_decode_problem

        why_not = gpu_decode_problem(args.device if args.device.startswith("cuda") else "cuda")
        if why_not is not None:
            parser.error(f"--decode-device cuda: {why_not}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_train_feed_") as tmp:
        results = (measure_multiclass if args.multiclass else measure)(args, Path(tmp))
    results["seconds"] = time.perf_counter() - started
    print("\n".join((multiclass_lines if args.multiclass else report_lines)(results)))
    print(f"[{results['seconds']:.0f} s]")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
