"""Our reader against a tf.data pipeline built like Meta-Dataset's, on the same records.

    python benchmarks/episodes.py --records DIR [--split train] [--rounds 6] [--round-episodes 10]

Each reader runs in its own child process (so peak RSS is its own and TensorFlow's threads do
not share a process with ours), reads the same episodes (variable ways and shots, the same
descriptions: classes and shots per class of episode i), warms up on 5 episodes, then the
driver asks the children in turn for `round_episodes` more, `rounds` times: interleaved, every
reader sees the same machine load, and the readers not being measured are paused (SIGSTOP on
their process group), so no background prefetching runs while another is timed. Reported per reader: episodes/s and images/s over all
rounds and the range over rounds, CPU time per episode (the process and its decode workers:
robust to other tenants' load), peak RSS. Without `--records`, a folder of 50 classes x 100
84x84 JPEG records (Meta-Dataset's record format, train split, no `.index`) is written first.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WARM_UP = 5


@dataclass(frozen=True)
class Contender:
    key: str
    label: str
    options: dict | None  # EpisodeReader options; None: the tf.data pipeline


def contenders(processes: int) -> list[Contender]:
    return [
        Contender(
            "reference",
            "tf.data pipeline built like the reference's (float32 in [-1, 1])",
            None,
        ),
        Contender(
            "inline",
            "EpisodeReader, inline decode (decode_processes=0), uint8",
            {"decode_processes": 0, "num_threads": 0},
        ),
        Contender(
            "processes",
            f"EpisodeReader(decode_processes={processes}), uint8",
            {"decode_processes": processes},
        ),
        Contender(
            "default_float",
            "EpisodeReader() defaults, float32 in [-1, 1] (as the reference)",
            {"dtype": "float32", "float_range": (-1.0, 1.0)},
        ),
    ]


# ------------------------------------------------------------------------------ child side


def _status_kb(pid: int | str, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    return 0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_main(key: str, records: str, split: str, processes: int) -> None:
    """Serve "run N" lines on stdin with one JSON line each on stdout; exit on "quit"."""
    from episodes.reading.reader import EpisodeReader
    from episodes.sampling.sampler import EpisodeSampler, SamplerConfig
    from episodes.sampling.sampler_factory import load_dataset

    contender = next(c for c in contenders(processes) if c.key == key)
    config = SamplerConfig()
    reader = None
    if contender.options is None:
        from benchmarks.reference_pipeline import reference_episodes

        spec = load_dataset(records)
        sampler = EpisodeSampler(spec, split, config, 0)
        descriptions = (sampler.episode(i) for i in range(10**9))
        stream = iter(reference_episodes(spec, split, descriptions, config))

        def count(episode) -> int:
            return int(episode[0].shape[0] + episode[3].shape[0])
    else:
        reader = EpisodeReader(
            records, split, config, 0, decoded_cache="never", **contender.options
        )
        stream = reader.episodes(0, None)

        def count(episode) -> int:
            return len(episode.support_images) + len(episode.query_images)

    def workers() -> list[int]:
        pool = getattr(reader, "_process_pool", None)
        return [p.pid for p in pool._processes] if pool is not None else []

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime + sum(_cpu_seconds(p) for p in workers())

    for line in sys.stdin:
        command = line.split()
        if command[0] == "run":
            n = int(command[1])
            cpu0, t0, images = cpu(), time.perf_counter(), 0
            for _ in range(n):
                images += count(next(stream))
            reply = {
                "episodes": n,
                "images": images,
                "seconds": time.perf_counter() - t0,
                "cpu_seconds": cpu() - cpu0,
            }
        else:
            reply = {
                "peak_rss_kb": _status_kb("self", "VmHWM"),
                "workers_peak_rss_kb": sum(_status_kb(p, "VmHWM") for p in workers()),
                "workers": len(workers()),
            }
        print(json.dumps(reply), flush=True)
        if command[0] == "quit":
            break
    if reader is not None:
        reader.close()
    os._exit(0)  # tf.data's generator thread can keep a normal exit waiting


# ----------------------------------------------------------------------------- driver side


def write_records_folder(folder: Path, classes: int = 50, per_class: int = 100) -> Path:
    """50 classes x 100 JPEG 84x84 records in Meta-Dataset's format, all in the train split,
    without `.index` sidecars (the reader builds them on first use, as for the reference's)."""
    from benchmarks.synthetic_dataset import write_jpeg_dataset
    from episodes.records.dataset_spec import Split

    write_jpeg_dataset(folder, "bench_records", Split.TRAIN, classes, per_class, index=False)
    return folder


class _Child:
    def __init__(self, contender: Contender, records: Path, split: str, processes: int):
        self.contender = contender
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "TF_CPP_MIN_LOG_LEVEL": "2",
        }
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.reference_comparison",
                "--child",
                contender.key,
                str(records),
                split,
                str(processes),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
            start_new_session=True,  # its own process group: it and its workers pause together
        )

    def pause(self, paused: bool) -> None:
        """Stop (or continue) this reader and its worker processes, so that background work
        (tf.data's prefetching threads) cannot run while another reader is measured."""
        os.killpg(self.process.pid, signal.SIGSTOP if paused else signal.SIGCONT)

    def ask(self, command: str) -> dict:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(
                f"benchmark child {self.contender.key} exited (code {self.process.wait()})"
            )
        return json.loads(line)


def compare(records: Path, split: str, processes: int, rounds: int, round_episodes: int) -> dict:
    """Interleaved rounds of every contender (module docstring); returns the numbers."""
    children = [_Child(c, records, split, processes) for c in contenders(processes)]
    try:
        for child in children:
            child.ask(f"run {WARM_UP}")
        runs: dict[str, list[dict]] = {c.contender.key: [] for c in children}
        for _ in range(rounds):
            for child in children:
                for other in children:
                    other.pause(other is not child)
                runs[child.contender.key].append(child.ask(f"run {round_episodes}"))
        for child in children:
            child.pause(False)
        memory = {c.contender.key: c.ask("quit") for c in children}
    finally:
        for child in children:
            if child.process.poll() is None:
                child.process.kill()
            child.process.wait()
    out: dict = {
        "records": str(records),
        "split": split,
        "rounds": rounds,
        "round_episodes": round_episodes,
        "readers": {},
    }
    reference = runs["reference"]
    for child in children:
        key = child.contender.key
        rows = runs[key]
        seconds = sum(r["seconds"] for r in rows)
        episodes = sum(r["episodes"] for r in rows)
        rates = [r["episodes"] / r["seconds"] for r in rows]
        ratios = [
            (r["episodes"] / r["seconds"]) / (ref["episodes"] / ref["seconds"])
            for r, ref in zip(rows, reference)
        ]
        out["readers"][key] = {
            "label": child.contender.label,
            "episodes_per_s": episodes / seconds,
            "images_per_s": sum(r["images"] for r in rows) / seconds,
            "episodes_per_s_range": [min(rates), max(rates)],
            "ratio_to_reference_median": float(np.median(ratios)),
            "ratio_to_reference_range": [min(ratios), max(ratios)],
            "cpu_ms_per_episode": 1e3 * sum(r["cpu_seconds"] for r in rows) / episodes,
            "peak_rss_mb": memory[key]["peak_rss_kb"] / 1024,
            "workers_peak_rss_mb": memory[key]["workers_peak_rss_kb"] / 1024,
            "workers": memory[key]["workers"],
        }
    return out


def report_lines(result: dict) -> list[str]:
    lines = [
        f"0. against a tf.data pipeline built like the reference's: {result['records']} "
        f"({result['split']} split), variable ways/shots, {result['rounds']} interleaved rounds "
        f"of {result['round_episodes']} episodes after {WARM_UP} warm-up",
        "| reader | episodes/s (range over rounds) | images/s | x reference (median, range) "
        "| CPU ms/episode | peak RSS (+ decode workers) |",
        "|---|---|---|---|---|---|",
    ]
    for row in result["readers"].values():
        low, high = row["episodes_per_s_range"]
        r_low, r_high = row["ratio_to_reference_range"]
        workers = (
            f" (+ {row['workers_peak_rss_mb']:,.0f} MB in {row['workers']})"
            if row["workers"]
            else ""
        )
        lines.append(
            f"| {row['label']} | {row['episodes_per_s']:.1f} ({low:.1f}-{high:.1f}) | "
            f"{row['images_per_s']:,.0f} | {row['ratio_to_reference_median']:.2f} "
            f"({r_low:.2f}-{r_high:.2f}) | {row['cpu_ms_per_episode']:.0f} | "
            f"{row['peak_rss_mb']:,.0f} MB{workers} |"
        )
    return lines


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        child_main(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        sys.exit("run benchmarks/episodes.py --records DIR (this module is its helper)")
