"""Conversion throughput: Beam with 1 and 2 DirectRunner workers vs. a plain decode/re-encode loop.

    python benchmarks/convert.py [--raw data/raw/omniglot_glyphs] [--repeat 1]

The plain loop reads every image file, decodes it and re-encodes it with the same codec and
options as the converter: the floor a converter cannot beat. Numbers are printed as images/s
and as ratios to that loop, all measured in this run on this machine. Target: the 1-worker
Beam job reaches at least 0.5 of the plain loop.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from beam_pipelines.conversion import convert  # noqa: E402
from beam_pipelines.image_codec import process_image  # noqa: E402
from beam_pipelines.runner_options import make_runner  # noqa: E402
from beam_pipelines.sources.omniglot import OmniglotSource  # noqa: E402


def plain_loop(raw: Path, source: OmniglotSource) -> tuple[int, float]:
    plan = source.plan(raw)
    options = plan.image_options
    start = time.perf_counter()
    count = 0
    for unit in plan.units:
        for item in source.read_unit(unit):
            process_image(item.data, options, item.array, item.crop_box)
            count += 1
    return count, time.perf_counter() - start


def beam_run(raw: Path, workers: int, out_root: Path) -> tuple[int, float]:
    args = argparse.Namespace(runner="DirectRunner", direct_num_workers=workers)
    out = out_root / f"omniglot_w{workers}"
    start = time.perf_counter()
    report = convert(OmniglotSource(), raw, out, make_runner(args, []))
    return report.images, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--raw", type=Path, default=ROOT / "data" / "raw" / "omniglot_glyphs")
    parser.add_argument("--repeat", type=int, default=1, help="runs per variant (best is kept)")
    args = parser.parse_args()
    if (
        not (args.raw / "images_background").exists()
        and not (args.raw / "images_background.zip").exists()
    ):
        print(f"generating the embedded dataset into {args.raw} ...", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "beam_pipelines.glyph_dataset", "--output", str(args.raw)],
            check=True,
        )
    source = OmniglotSource()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in (
            ("plain decode+encode loop", lambda: plain_loop(args.raw, source)),
            ("Beam, 1 worker", lambda: beam_run(args.raw, 1, Path(tmp))),
            ("Beam, 2 workers", lambda: beam_run(args.raw, 2, Path(tmp))),
        ):
            best = None
            for _ in range(args.repeat):
                for leftover in Path(tmp).iterdir():
                    shutil.rmtree(leftover)
                count, seconds = fn()
                rate = count / seconds
                best = max(best or 0.0, rate)
            results[name] = (count, best)
    base = results["plain decode+encode loop"][1]
    print(f"{'variant':<28}{'images':>9}{'images/s':>12}{'ratio':>9}")
    for name, (count, rate) in results.items():
        print(f"{name:<28}{count:>9,}{rate:>12,.0f}{rate / base:>9.2f}")
    ratio = results["Beam, 1 worker"][1] / base
    print(
        f"1-worker Beam / plain loop = {ratio:.2f} (target >= 0.50): {'MET' if ratio >= 0.5 else 'NOT MET'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
