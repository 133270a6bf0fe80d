"""Conversion throughput against Meta-Dataset's own converter, side by side, same bytes.

    python -m benchmarks.convert [--reference-source DIR] [--rounds 4] [--workers 1,2]
                                 [--datasets omniglot,dtd] [--object-store]

Datasets: the embedded glyph set in Omniglot's layout (31,640 PNGs that both converters decode,
invert and store as JPEG) and a synthetic DTD layout of RGB JPEGs that both keep byte for byte
(`dtd/images/<class>/*.jpg`, the published DTD class names); both are generated under
`--scratch` when missing. The reference is google-research/meta-dataset's
`dataset_conversion/dataset_to_records.py`, imported from a checkout given by
`--reference-source` (or $META_DATASET_SOURCE: the folder holding `meta_dataset/`); it is never
vendored, and without it the reference rows are skipped with a line saying so.

Every run is a fresh child process (as a user's command), timed from just before the conversion
(the reference's `convert_dataset()` with its converter's construction; our `convert()` with the
plan, the Beam pipeline and the publish), imports excluded. Contenders alternate within each
round (A B A B), so each sees the same machine load. Printed per contender: images/s in wall time
and per CPU-second (the process and its workers: what one core converts, robust to other
tenants' load), and the ratio to the reference in the same round (median and range). The class
files of the two converters are compared byte for byte. `--workers 1,2` adds our DirectRunner
with that many worker processes (the scaling table: on an N-core machine, N workers). Goal: our
1-worker run >= 1.5x the reference's images per CPU-second.

`--baseline-source DIR` adds another checkout of this project (e.g. `git archive COMMIT | tar -x
-C DIR`) as a contender in the same rounds: what a change gained, same machine, same load.

`--object-store`: the same conversion (a glyph set of `--object-store-characters` characters per
alphabet) from local raw files to an S3 output and from S3 raw files to an S3 output (a moto
server on 127.0.0.1 unless Beam's S3 flags are given after `--`), alternated, with each of
`--workers`; goal: s3 -> s3 >= 0.8x local -> s3 images/s, and 2 workers not slower than 1.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_ENV = "META_DATASET_SOURCE"
GOAL_REFERENCE = 1.5
GOAL_OBJECT_STORE = 0.8
DTD_IMAGES_PER_CLASS = 120
DTD_SIDE = 300


# ------------------------------------------------------------------------------ the data


def ensure_glyphs(folder: Path, *options: str) -> Path:
    """The embedded glyph dataset in Omniglot's layout (generated once; `options` of
    `python -m beam_pipelines.glyph_dataset`, e.g. a smaller set)."""
    if not (folder / "images_background").is_dir():
        print(f"generating the glyph dataset into {folder} ...", file=sys.stderr)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "beam_pipelines.glyph_dataset",
                "--output",
                str(folder),
                *options,
            ],
            check=True,
            cwd=ROOT,
        )
    return folder


def dtd_split_lists() -> dict[str, list[str]]:
    """The published DTD class lists (our sources ship them)."""
    from beam_pipelines.sources._lib.published_splits import published_split_name, split_lists
    from episodes.records.published_splits import load_published

    lists = split_lists(load_published(published_split_name("dtd")))
    return {split.value: names for split, names in lists.items()}


def ensure_dtd(folder: Path) -> Path:
    """`dtd/images/<class>/*.jpg`: DTD_IMAGES_PER_CLASS RGB JPEGs per published class."""
    if (folder / "dtd" / "images").is_dir():
        return folder
    import numpy as np

    from benchmarks.synthetic_dataset import synthetic_jpeg

    print(f"generating the JPEG dataset into {folder} ...", file=sys.stderr)
    rng = np.random.default_rng(0)
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    for names in dtd_split_lists().values():
        for name in names:
            target = staging / "dtd" / "images" / name
            target.mkdir(parents=True)
            for i in range(DTD_IMAGES_PER_CLASS):
                (target / f"{name}_{i:04d}.jpg").write_bytes(synthetic_jpeg(rng, DTD_SIDE))
    staging.rename(folder)
    return folder


# ----------------------------------------------------------------------------- child side


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _import_reference(source: str):
    sys.path.insert(0, source)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from meta_dataset.data import learning_spec
    from meta_dataset.dataset_conversion import dataset_to_records

    return dataset_to_records, learning_spec


def run_reference(dataset: str, raw: Path, out: Path, source: str) -> int:
    """The reference converter on `raw`; returns the images written."""
    d2r, learning_spec = _import_reference(source)
    if dataset == "omniglot":
        valid = _our_plan(dataset, raw).provenance["valid_alphabets_in_id_order"]

        class GlyphOmniglot(d2r.OmniglotConverter):
            """The reference's Omniglot conversion with this set's valid alphabets (its own list
            names the real Omniglot's)."""

            def create_dataset_specification_and_records(self):
                background = os.path.join(self.data_root, "images_background")
                evaluation = os.path.join(self.data_root, "images_evaluation")
                train = [a for a in sorted(os.listdir(background)) if a not in valid]
                self.parse_split_data(learning_spec.Split.TRAIN, train, background)
                self.parse_split_data(learning_spec.Split.VALID, valid, background)
                test = sorted(os.listdir(evaluation))
                self.parse_split_data(learning_spec.Split.TEST, test, evaluation)

        make = GlyphOmniglot
        unused = out.parent / f"{out.name}-splits.json"  # Omniglot's splits are its folders
        kwargs = {"data_root": str(raw), "split_file": str(unused)}
    else:
        split_file = out.parent / f"{out.name}-splits.json"
        split_file.write_text(json.dumps(dtd_split_lists()))
        make = d2r.DTDConverter
        kwargs = {"data_root": str(raw / "dtd"), "split_file": str(split_file)}
    start = time.perf_counter(), _cpu_seconds()
    converter = make(name=dataset, records_path=str(out), **kwargs)
    converter.convert_dataset()
    return _timed(start, sum(converter.images_per_class.values()))


def _our_plan(dataset: str, raw: Path):
    from beam_pipelines.sources import get_source_class

    plan = get_source_class(dataset)().plan(raw)
    if dataset == "omniglot":  # the valid alphabets in class-id order (the reference's order)
        valid = [c.superclass for c in plan.classes if c.split.value == "valid"]
        plan.provenance["valid_alphabets_in_id_order"] = list(dict.fromkeys(valid))
    return plan


def run_ours(dataset: str, raw: Path, out: str, workers: int, beam_args: list[str]) -> int:
    from beam_pipelines.conversion.pipeline import convert
    from beam_pipelines.runners.options import make_runner
    from beam_pipelines.sources import get_source_class

    runner = make_runner(
        argparse.Namespace(runner="DirectRunner", direct_num_workers=workers), beam_args
    )
    output = out if "://" in out else Path(out)
    start = time.perf_counter(), _cpu_seconds()
    report = convert(get_source_class(dataset)(), raw, output, runner)
    return _timed(start, report.images)


def _timed(start: tuple[float, float], images: int) -> int:
    wall, cpu = start
    print(
        json.dumps(
            {
                "images": images,
                "seconds": time.perf_counter() - wall,
                "cpu_seconds": _cpu_seconds() - cpu,
            }
        )
    )
    return 0


def child_main(argv: list[str]) -> int:
    kind, dataset, raw, out, extra = argv[:5]
    if kind == "reference":
        return run_reference(dataset, Path(raw), Path(out), extra)
    return run_ours(dataset, raw, out, int(extra), argv[5:])


# ---------------------------------------------------------------------------- driver side


def run_child(
    kind: str, dataset: str, raw: str, out: str, extra: str, beam_args=(), project: Path = ROOT
) -> dict:
    """One timed conversion in a fresh process; `project`: the checkout of this project whose
    converter runs (another one: a baseline, e.g. the commit before a change)."""
    env = {**os.environ, "PYTHONPATH": str(project), "TF_CPP_MIN_LOG_LEVEL": "2"}
    script = str(Path(__file__).resolve())  # this file's child side, whatever `project`
    done = subprocess.run(
        [sys.executable, script, "--child", kind, dataset, raw, out, extra] + list(beam_args),
        capture_output=True,
        text=True,
        cwd=project,
        env=env,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{kind} {dataset} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def differing_class_files(ours: Path, reference: Path) -> tuple[list[str], list[str]]:
    """(record files whose bytes differ or that only one converter wrote, those of them whose
    records differ too). The reference serialises each tf.train.Example with protobuf's upb,
    whose map order changes with a per-process hash seed: most runs write `image` before
    `label` (our fixed order), some `label` first, the same records in other bytes."""
    from episodes.records.example_proto import decode_example
    from episodes.records.tfrecord_io import iter_records

    names = {p.name for p in ours.glob("*.tfrecords")} | {
        p.name for p in reference.glob("*.tfrecords")
    }
    in_bytes, in_records = [], []
    for name in sorted(names):
        if not (ours / name).is_file() or not (reference / name).is_file():
            in_bytes.append(name)
            in_records.append(name)
        elif (ours / name).read_bytes() != (reference / name).read_bytes():
            in_bytes.append(name)
            mine = [decode_example(r) for r in iter_records(str(ours / name))]
            theirs = [decode_example(r) for r in iter_records(str(reference / name))]
            if mine != theirs:
                in_records.append(name)
    return in_bytes, in_records


def summarize(runs: dict[str, list[dict]], baseline: str) -> list[tuple]:
    """Per contender: images, median wall and CPU images/s, ratios to `baseline` per round."""
    rows = []
    for name, results in runs.items():
        wall = [r["images"] / r["seconds"] for r in results]
        cpu = [r["images"] / r["cpu_seconds"] for r in results]
        base = runs.get(baseline)
        if base:
            cpu_ratio = [c / (b["images"] / b["cpu_seconds"]) for c, b in zip(cpu, base)]
            wall_ratio = [w / (b["images"] / b["seconds"]) for w, b in zip(wall, base)]
        else:
            cpu_ratio = wall_ratio = [float("nan")]
        rows.append(
            (
                name,
                results[0]["images"],
                statistics.median(wall),
                statistics.median(cpu),
                statistics.median(wall_ratio),
                (min(wall_ratio), max(wall_ratio)),
                statistics.median(cpu_ratio),
                (min(cpu_ratio), max(cpu_ratio)),
            )
        )
    return rows


def print_table(title: str, rows: list[tuple], baseline: str) -> None:
    print(f"\n{title}")
    print(
        f"{'contender':<34}{'images':>8}{'img/s':>9}{'img/CPU-s':>11}"
        f"{'x ' + baseline + ' wall (range)':>28}{'x per CPU-s (range)':>24}"
    )
    for name, images, wall, cpu, w_ratio, w_range, c_ratio, c_range in rows:
        print(
            f"{name:<34}{images:>8,}{wall:>9,.0f}{cpu:>11,.0f}"
            f"{w_ratio:>15.2f} ({w_range[0]:.2f}-{w_range[1]:.2f})"
            f"{c_ratio:>12.2f} ({c_range[0]:.2f}-{c_range[1]:.2f})"
        )


def compare_with_reference(args, dataset: str, raw: Path, reference: str | None) -> None:
    scratch = args.scratch / "out"
    scratch.mkdir(parents=True, exist_ok=True)
    contenders = [] if reference is None else [("reference", "reference", reference)]
    contenders += [(f"ours, {n} worker(s)", "ours", str(n)) for n in args.workers]
    if args.baseline_source is not None:
        contenders.append(("baseline checkout, 1 worker", "baseline", "1"))
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in contenders}
    for round_ in range(args.rounds):
        order = contenders if round_ % 2 == 0 else contenders[::-1]
        for name, kind, extra in order:
            out = scratch / f"{dataset}-{kind}-{extra if kind != 'reference' else 'md'}"
            shutil.rmtree(out, ignore_errors=True)
            project = args.baseline_source if kind == "baseline" else ROOT
            child = "ours" if kind == "baseline" else kind
            runs[name].append(run_child(child, dataset, str(raw), str(out), extra, project=project))
    if reference is not None:
        in_bytes, in_records = differing_class_files(
            scratch / f"{dataset}-ours-{args.workers[0]}", scratch / f"{dataset}-reference-md"
        )
        total = len(list((scratch / f"{dataset}-reference-md").glob("*.tfrecords")))
        if not in_bytes:
            same = "all byte-identical"
        elif not in_records:
            same = (
                f"the same records; {len(in_bytes)} in other bytes: this reference run wrote "
                "`label` before `image` (its protobuf map order varies by process)"
            )
        else:
            same = f"{len(in_records)} DIFFER in their records"
        print(f"\n{dataset}: {total} class files of the reference and ours: {same}")
    rows = summarize(runs, "reference")
    print_table(f"{dataset}: {args.rounds} alternated rounds", rows, "reference")
    if reference is not None:
        ours = next(r for r in rows if r[0] == f"ours, {args.workers[0]} worker(s)")
        verdict = "MET" if ours[6] >= GOAL_REFERENCE else "NOT MET"
        print(
            f"{dataset}: ours / reference images per CPU-second = {ours[6]:.2f} "
            f"(goal >= {GOAL_REFERENCE}): {verdict}"
        )


def compare_object_store(args, beam_args: list[str]) -> None:
    from benchmarks.class_file_memory import s3_store

    characters = str(args.object_store_characters)
    raw = ensure_glyphs(args.scratch / f"glyphs-{characters}", "--max-characters", characters)
    server: list[int] = []
    with s3_store("s3://bench-out/x", beam_args, server) as flags:
        _upload_folder(raw, f"s3://bench-raw/glyphs-{characters}", flags)
        contenders = [(f"local -> s3, {n} worker(s)", str(raw), n) for n in args.workers] + [
            (f"s3 -> s3, {n} worker(s)", f"s3://bench-raw/glyphs-{characters}", n)
            for n in args.workers
        ]
        runs: dict[str, list[dict]] = {name: [] for name, _, _ in contenders}
        for round_ in range(args.rounds):
            order = contenders if round_ % 2 == 0 else contenders[::-1]
            for i, (name, source, workers) in enumerate(order):
                out = f"s3://bench-out/r{round_}-{i}"
                before = process_cpu_seconds(server[0]) if server else 0.0
                run = run_child("ours", "omniglot", source, out, str(workers), flags)
                if server:
                    run["server_cpu_seconds"] = process_cpu_seconds(server[0]) - before
                runs[name].append(run)
        for n in args.workers:
            rows = summarize(
                {k: v for k, v in runs.items() if k.endswith(f" {n} worker(s)")},
                f"local -> s3, {n} worker(s)",
            )
            print_table(f"object store, {n} worker(s), {args.rounds} rounds", rows, "local")
            ratio = rows[1][4]
            verdict = "MET" if ratio >= GOAL_OBJECT_STORE else "NOT MET"
            print(
                f"s3 -> s3 / local -> s3 images/s, {n} worker(s) = {ratio:.2f} "
                f"(goal >= {GOAL_OBJECT_STORE}): {verdict}"
            )
            if server:
                print_server_share(runs, n)
        if len(args.workers) > 1:
            rows = summarize(
                {k: v for k, v in runs.items() if k.startswith("s3 -> s3")},
                f"s3 -> s3, {args.workers[0]} worker(s)",
            )
            print_table(f"scaling, s3 -> s3, {args.rounds} rounds", rows, "1st")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process `pid` has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def print_server_share(runs: dict[str, list[dict]], workers: int) -> None:
    """What the loopback S3 server itself costs per image, beside the converter's own CPU:
    on a machine whose cores the server shares, its request handling bounds s3 -> s3."""
    for name, results in runs.items():
        if name.endswith(f" {workers} worker(s)"):
            images = results[0]["images"]
            server = statistics.median(r["server_cpu_seconds"] for r in results) / images
            ours = statistics.median(r["cpu_seconds"] for r in results) / images
            print(
                f"  {name:<28} converter CPU {ours * 1e6:,.0f} us/image, "
                f"S3 server CPU {server * 1e6:,.0f} us/image"
            )
    local, remote = (
        [r for k, v in runs.items() if k == f"{side} -> s3, {workers} worker(s)" for r in v]
        for side in ("local", "s3")
    )
    ratio = statistics.median(
        (b["images"] / b["cpu_seconds"]) / (a["images"] / a["cpu_seconds"])
        for a, b in zip(local, remote)
    )
    print(f"  s3 -> s3 / local -> s3 images per converter CPU-second = {ratio:.2f}")


def _upload_folder(folder: Path, url: str, flags: list[str]) -> None:
    """Put every file under `folder` below `url` (the bucket created if missing)."""
    import boto3

    options = dict(a[2:].split("=", 1) for a in flags if a.startswith("--s3_"))
    client = boto3.client(
        "s3",
        endpoint_url=options.get("s3_endpoint_url"),
        aws_access_key_id=options.get("s3_access_key_id"),
        aws_secret_access_key=options.get("s3_secret_access_key"),
        region_name=options.get("s3_region_name"),
    )
    bucket, _, prefix = url[len("s3://") :].partition("/")
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        return
    files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
    from concurrent.futures import ThreadPoolExecutor

    def put(path: Path) -> None:
        key = f"{prefix}/{path.relative_to(folder).as_posix()}"
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, files))


def load_line() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--reference-source",
        default=os.environ.get(REFERENCE_ENV),
        help=f"a google-research/meta-dataset checkout (default ${REFERENCE_ENV})",
    )
    parser.add_argument("--scratch", type=Path, default=ROOT / "data" / "bench-convert")
    parser.add_argument(
        "--baseline-source",
        type=Path,
        help="another checkout of this project (e.g. `git archive COMMIT`) run as one more "
        "contender: the speed-up of a change, measured in the same rounds",
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--workers", default="1", help="comma-separated worker counts")
    parser.add_argument("--datasets", default="omniglot,dtd")
    parser.add_argument("--object-store", action="store_true")
    parser.add_argument(
        "--object-store-characters",
        type=int,
        default=4,
        help="characters per alphabet of the glyph set the object-store runs convert "
        "(4: 4,000 images)",
    )
    args, beam_args = parser.parse_known_args(argv)
    args.workers = [int(n) for n in args.workers.split(",")]
    args.scratch.mkdir(parents=True, exist_ok=True)
    print(f"machine: {load_line()} at the start")
    if args.object_store:
        compare_object_store(args, [a for a in beam_args if a != "--"])
        print(f"machine: {load_line()} at the end")
        return 0
    reference = args.reference_source
    if reference is not None:
        try:
            _import_reference(reference)
        except ImportError as exc:
            print(f"reference converter not importable from {reference} ({exc}): skipped")
            reference = None
    else:
        print(
            f"reference converter: skipped (give --reference-source or ${REFERENCE_ENV}: a "
            "google-research/meta-dataset checkout, the folder holding meta_dataset/)"
        )
    for dataset in args.datasets.split(","):
        raw = (ensure_glyphs if dataset == "omniglot" else ensure_dtd)(args.scratch / dataset)
        compare_with_reference(args, dataset, raw, reference)
    print(f"machine: {load_line()} at the end")
    return 0


if __name__ == "__main__":
    # run as a script: its folder must not shadow packages (benchmarks/episodes.py)
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    if len(sys.argv) > 1 and sys.argv[1] == "--child":  # PYTHONPATH names the checkout
        sys.exit(child_main(sys.argv[2:]))
    sys.path.insert(0, str(ROOT))  # `python benchmarks/convert.py` (make bench)
    sys.exit(main())
