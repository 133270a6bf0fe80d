"""Peak memory of writing one large class: the streaming class-file writer against the buffered
writer it replaced, measured in the same run.

One class of 2,000 JPEGs of about 100 KB each (an ImageNet class holds about 1,300 full-size
JPEGs) is converted with 2 local worker processes, once per writer, each conversion in a fresh
launcher process. Buffered: the encoded images cross the GroupByKey and the class file is built
in memory (the writer before streaming). Streaming: records wait in spill files, references
cross the GroupByKey, the class file is streamed (beam_pipelines.conversion.frame_spill). Printed per writer: the peak RSS of the largest worker process (the one that
writes the class file; ru_maxrss of the launcher's children), the launcher's own peak RSS (the
local runner keeps the grouped images there), and the time. Run from the repository root:

    .venv/bin/python -m benchmarks.class_file_memory [--images 2000] [--kb 100]

`--staging s3://BUCKET/PREFIX` instead compares the streaming writer with local staging (the
baseline) against staging in object storage (the output written under that URL, so the job's
spill and class files go there): Beam's S3 flags (`--s3_endpoint_url` ...) point at the store,
and without them a moto S3 server is started on 127.0.0.1 for the run. `--classes N` spreads
the images over N classes (each bundle then holds many classes: what object-store staging
once paid an open upload for each).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from beam_pipelines.conversion.writer import EncodeImagesFn
from beam_pipelines.sources.base import ClassInfo, ConversionPlan, RawItem, Source, WorkUnit
from episodes.records.example_proto import encode_image_example
from episodes.records.record_index import RecordIndex
from episodes.records.tfrecord_io import frame_record

IMAGES_PER_UNIT = 250


class BufferedEncodeImagesFn(EncodeImagesFn):
    """The encoder before spill files (the baseline): encoded images travel through Beam."""

    def whole_class_of(self, unit):
        return None  # every record crosses the GroupByKey

    def start_bundle(self):
        pass

    def finish_bundle(self):
        self._counter.flush()

    def emit(self, class_id: int, key: str, encoded: bytes):
        return class_id, (key, encoded)


def buffered_write_class_file(
    element: tuple[int, Iterable[list[tuple[str, bytes]]]], output_dir: str
) -> dict[str, Any]:
    """The class writer before streaming (the baseline): the class's records in one buffer."""
    from apache_beam.io.filesystems import FileSystems

    from beam_pipelines.conversion.writer import _write_bytes, class_file_names

    class_id, batches = element
    values = [value for batch in batches for value in batch]
    ordered = sorted(values, key=lambda kv: (kv[0], hashlib.sha256(kv[1]).digest()))
    keys = [k for k, _ in ordered]
    buffer = io.BytesIO()
    offsets = []
    for _, image in ordered:
        offsets.append(buffer.tell())
        buffer.write(frame_record(encode_image_example(image, class_id)))
    data = buffer.getvalue()
    records_name, index_name = class_file_names(class_id)
    _write_bytes(FileSystems.join(output_dir, records_name), data)
    index = RecordIndex(np.asarray(offsets, dtype=np.uint64), len(data))
    _write_bytes(FileSystems.join(output_dir, index_name), index.to_bytes())
    return {
        "class_id": int(class_id),
        "images": len(ordered),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "duplicate_keys": len(keys) - len(set(keys)),
    }


class OneLargeClassSource(Source):
    """Every JPEG of one folder as one class (or image i in class i % `classes`), read in units
    of IMAGES_PER_UNIT files."""

    name = "one_large_class"
    layout = "a folder of .jpg files"
    classes = 1

    def class_of(self, position: int) -> str:
        return "large" if self.classes == 1 else f"c{position % self.classes:04d}"

    def plan(self, input_path: Path) -> ConversionPlan:
        files = sorted(str(p) for p in Path(input_path).glob("*.jpg"))
        units = [
            WorkUnit(
                f"unit{i:04d}",
                tuple(files[i : i + IMAGES_PER_UNIT]),
                len(files[i : i + IMAGES_PER_UNIT]),
            )
            for i in range(0, len(files), IMAGES_PER_UNIT)
        ]
        return ConversionPlan(
            source=self.name,
            dataset_name="large_class",
            classes=[ClassInfo(self.class_of(i)) for i in range(self.classes)],
            units=units,
            image_options=self.image_options(),
        )

    def read_unit(self, unit: WorkUnit) -> Iterator[RawItem]:
        for path in unit.payload:
            position = int(Path(path).stem[3:])  # img00042.jpg
            name = self.class_of(position)
            yield RawItem(name, Path(path).name, path, data=Path(path).read_bytes())


def write_jpegs(folder: Path, count: int, kb: int, seed: int = 0) -> float:
    """`count` distinct photo-like JPEGs of about `kb` KB; returns their mean size in KB."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    side = int(380 * (kb / 100) ** 0.5)  # about `kb` KB at quality 92 for this texture
    yy, xx = np.mgrid[0:side, 0:side]
    sizes = []
    for i in range(count):
        phase = rng.uniform(0, 6.3, 3)
        base = np.stack(
            [127 + 90 * np.sin(xx / (7 + c) + yy / 11 + phase[c]) for c in range(3)], -1
        )
        noise = rng.normal(0, 24, (side, side, 3))
        pixels = np.clip(base + noise, 0, 255).astype(np.uint8)
        path = folder / f"img{i:05d}.jpg"
        Image.fromarray(pixels).save(path, format="JPEG", quality=92)
        sizes.append(path.stat().st_size)
    return float(np.mean(sizes)) / 1024


def run_one(
    writer: str,
    images: Path,
    output: str,
    workers: int,
    classes: int = 1,
    beam_args: list[str] | None = None,
) -> dict[str, Any]:
    """One conversion in this (fresh) process; its peak RSS and its workers'."""
    from beam_pipelines.conversion import writer as writer_module
    from beam_pipelines.conversion.pipeline import convert
    from beam_pipelines.runners.options import make_runner

    if writer == "buffered":  # today's pipeline pieces, as they were before streaming
        writer_module.EncodeImagesFn = BufferedEncodeImagesFn
        writer_module.write_class_file = buffered_write_class_file
    runner = make_runner(
        argparse.Namespace(runner="DirectRunner", direct_num_workers=workers), beam_args or []
    )
    source = OneLargeClassSource()
    source.classes = classes
    start = time.monotonic()
    report = convert(source, images, output if "://" in output else Path(output), runner)
    seconds = time.monotonic() - start
    return {
        "writer": writer,
        "images": report.images,
        "records_sha256": report.spec.provenance["records_sha256"],
        "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "launcher_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds": seconds,
    }


def run_child(writer: str, images: Path, output: str, args, beam_args: list[str]) -> dict:
    """`run_one` in a fresh process (so that its peak RSS is its own)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.class_file_memory",
            "--one",
            writer,
            "--input",
            str(images),
            "--output",
            output,
            "--workers",
            str(args.workers),
            "--classes",
            str(args.classes),
            *beam_args,
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_result(name: str, r: dict) -> None:
    print(
        f"  {name:17s}  worker peak RSS {r['worker_peak_rss_mb']:7.0f} MB   launcher peak "
        f"RSS {r['launcher_peak_rss_mb']:7.0f} MB   {r['seconds']:5.1f} s"
    )


def compare_writers(images: Path, tmp: str, args) -> None:
    results = {}
    for writer in ("buffered", "streaming"):
        results[writer] = run_child(writer, images, str(Path(tmp) / writer), args, [])
        print_result(writer, results[writer])
    b, s = results["buffered"], results["streaming"]
    assert b["records_sha256"] == s["records_sha256"], "the two writers wrote different records"
    print(
        f"streaming / buffered worker peak RSS: {s['worker_peak_rss_mb'] / b['worker_peak_rss_mb']:.2f} "
        f"(records byte-identical: sha256 {s['records_sha256'][:16]}...)"
    )


def compare_staging(images: Path, tmp: str, args, beam_args: list[str]) -> None:
    """The streaming writer staging locally (baseline) and in object storage."""
    with s3_store(args.staging, beam_args) as flags:
        local = run_child("streaming", images, str(Path(tmp) / "local"), args, [])
        print_result("local staging", local)
        remote = run_child("streaming", images, args.staging, args, flags)
        print_result(f"{args.staging.split(':')[0]} staging", remote)
    assert local["records_sha256"] == remote["records_sha256"], (
        "the stagings wrote different records"
    )
    ratio = remote["worker_peak_rss_mb"] / local["worker_peak_rss_mb"]
    print(
        f"object-store / local staging worker peak RSS: {ratio:.2f} "
        f"(records byte-identical: sha256 {remote['records_sha256'][:16]}...)"
    )


@contextlib.contextmanager
def s3_store(url: str, beam_args: list[str], server_pids: list[int] | None = None):
    """Beam's S3 flags for `url`: the given ones, or a moto server on 127.0.0.1 started here
    (its bucket created) and stopped after; its process id is appended to `server_pids`."""
    if not url.startswith("s3://") or any(a.startswith("--s3_endpoint_url") for a in beam_args):
        yield beam_args
        return
    import boto3

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if server_pids is not None:
        server_pids.append(server.pid)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the moto S3 server did not start") from None
                time.sleep(0.2)
        endpoint = f"http://127.0.0.1:{port}"
        keys = ["--s3_access_key_id=bench", "--s3_secret_access_key=bench"]
        flags = [f"--s3_endpoint_url={endpoint}", *keys, "--s3_region_name=us-east-1"]
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
        ).create_bucket(Bucket=url[len("s3://") :].split("/", 1)[0])
        os.environ.update({"AWS_EC2_METADATA_DISABLED": "true", "NO_PROXY": "127.0.0.1"})
        print(f"  (moto S3 server on {endpoint})")
        yield flags + beam_args
    finally:
        server.terminate()
        server.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--kb", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--classes", type=int, default=1, help="classes the images spread over")
    parser.add_argument(
        "--staging",
        help="compare local staging with staging under this URL (s3://BUCKET/PREFIX)",
    )
    parser.add_argument("--one", choices=["buffered", "streaming"], help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args, beam_args = parser.parse_known_args(argv)
    if args.one:  # a child: one conversion, one JSON line
        result = run_one(
            args.one, Path(args.input), args.output, args.workers, args.classes, beam_args
        )
        print(json.dumps(result))
        return 0
    with tempfile.TemporaryDirectory(prefix="class-file-memory-") as tmp:
        images = Path(tmp) / "images"
        mean_kb = write_jpegs(images, args.images, args.kb)
        total_mb = sum(p.stat().st_size for p in images.iterdir()) / 2**20
        print(
            f"{args.classes} class(es), {args.images:,} JPEGs, mean {mean_kb:.0f} KB "
            f"({total_mb:.0f} MB), {args.workers} local worker processes"
        )
        if args.staging:
            compare_staging(images, tmp, args, beam_args)
        else:
            compare_writers(images, tmp, args)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
