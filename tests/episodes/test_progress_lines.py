"""Progress lines: count, rate and ETA at most every `every_s` seconds; nothing when disabled."""

from __future__ import annotations

import io
import re

from episodes.util.progress_lines import ProgressLines


def test_lines_show_count_rate_and_eta_and_respect_the_interval():
    out = io.StringIO()
    bar = ProgressLines("job", expected=10, unit="images", every_s=0.0, stream=out)
    bar.advance(4, "2 classes")
    bar.advance(6)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert re.fullmatch(r"\[job\] 4/10 images \([\d,]+ images/s, ETA \d+s\) 2 classes", lines[0])
    assert lines[1].startswith("[job] 10/10 images (") and "ETA 0s" in lines[1]
    quiet = io.StringIO()
    slow = ProgressLines("job", expected=10, every_s=3600.0, stream=quiet)
    for _ in range(10):
        slow.advance()
    assert slow.count == 10 and quiet.getvalue() == ""
    off = io.StringIO()
    ProgressLines("job", every_s=0.0, enabled=False, stream=off).advance(5)
    assert off.getvalue() == ""
    unknown = io.StringIO()
    ProgressLines("job", unit="records", every_s=0.0, stream=unknown).advance(3)
    assert re.fullmatch(r"\[job\] 3 records \([\d,]+ records/s\)\n", unknown.getvalue())
