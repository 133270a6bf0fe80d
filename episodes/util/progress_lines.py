"""Periodic progress lines on stderr for long work: count, rate and ETA, every few seconds.

One small class for every long loop of the toolkit (conversion workers, embedding, verify,
episode shards, sampling statistics, archive listing), so they all read the same way:
`[label] 1,234/5,000 images (812 images/s, ETA 5s) detail`.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressLines"]


class ProgressLines:
    """Counts work with `advance(n)` and prints a line at most every `every_s` seconds."""

    def __init__(
        self,
        label: str,
        expected: int = 0,
        unit: str = "items",
        every_s: float = 5.0,
        enabled: bool = True,
        stream: TextIO | None = None,
    ):
        self.label = label
        self.expected = max(int(expected), 0)
        self.unit = unit
        self.every_s = every_s
        self.enabled = enabled
        self.stream = stream
        self.count = 0
        self.start = time.monotonic()
        self.last = self.start

    def advance(self, n: int = 1, detail: str = "") -> None:
        """Add `n` done units; print a line when `every_s` passed since the last one."""
        self.count += n
        now = time.monotonic()
        if not self.enabled or now - self.last < self.every_s:
            return
        self.last = now
        rate = self.count / max(now - self.start, 1e-9)
        done = f"{self.count:,}/{self.expected:,}" if self.expected else f"{self.count:,}"
        eta = ""
        if self.expected:
            eta = f", ETA {max(self.expected - self.count, 0) / max(rate, 1e-9):.0f}s"
        tail = f" {detail}" if detail else ""
        print(
            f"[{self.label}] {done} {self.unit} ({rate:,.0f} {self.unit}/s{eta}){tail}",
            file=self.stream or sys.stderr,
            flush=True,
        )
