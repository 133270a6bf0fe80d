"""Fetch one URL into one file: resumable, verified, atomic (urllib, the standard library).

The bytes go to `NAME.part` beside the target; a run that stops (a dropped connection, Ctrl-C,
SIGTERM, a full disk) leaves the part, and the next run asks the server for the rest with an
HTTP Range request (a server that ignores Range sends the whole file again, and the part is
restarted). Once the size is reached the part's SHA-256 (and MD5 where that is the published
digest) is checked, and only a matching part is renamed onto NAME; a mismatch removes the part
and names the URL that served it. Network faults are retried a bounded number of times with
doubling back-off; a socket that sends nothing for `timeout_s` counts as one fault.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from episodes.util.cli_errors import UserError
from episodes.util.progress_lines import ProgressLines

__all__ = [
    "CHUNK",
    "Expected",
    "fetch",
    "FetchError",
    "FetchOptions",
    "file_digests",
    "mismatch",
    "NETWORK_FAULTS",
    "part_path",
    "RETRIED_4XX",
    "USER_AGENT",
    "write_chunk",
]

CHUNK = 1 << 16
USER_AGENT = "few-shot-episodes-download/1 (urllib)"
# 4xx answers that a later try may not repeat (timeout, rate limit); others are final.
RETRIED_4XX = (408, 425, 429)


class FetchError(UserError):
    """A URL that could not be fetched, or served other bytes than registered: one line."""


@dataclass(frozen=True)
class FetchOptions:
    """How hard to try: seconds without data before a try fails, tries after the first, the
    first back-off (doubled each retry, at most `max_backoff_s`)."""

    timeout_s: float = 60.0
    retries: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    progress_every_s: float = 5.0


@dataclass(frozen=True)
class Expected:
    """What the file must be; None where unknown."""

    size: int | None = None
    sha256: str | None = None
    md5: str | None = None


def _left(part: Path) -> str:
    """What a failed download leaves: its partial file (which the next run resumes), or
    nothing (an empty one is removed)."""
    if part.is_file() and part.stat().st_size > 0:
        return f"the partial file {part.name} ({part.stat().st_size:,} bytes) is kept, run again to resume"
    part.unlink(missing_ok=True)
    return "nothing was written, run again to retry"


def part_path(target: Path) -> Path:
    return target.with_name(target.name + ".part")


def write_chunk(handle: BinaryIO, data: bytes) -> None:
    """Append one chunk to the part file (the one place bytes are written)."""
    handle.write(data)


def file_digests(path: Path, label: str = "", every_s: float = 5.0) -> tuple[int, str, str]:
    """(size, sha256, md5) of a file, read once; progress lines for a large one."""
    sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    total = path.stat().st_size
    progress = ProgressLines(f"verify {label or path.name}", total >> 20, "MiB", every_s)
    size = 0
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            sha.update(block)
            md5.update(block)
            size += len(block)
            progress.advance(1)
    return size, sha.hexdigest(), md5.hexdigest()


def mismatch(expected: Expected, digests: tuple[int, str, str]) -> str | None:
    """Why the file's (size, sha256, md5) is not the expected one, or None when it is."""
    size, sha256, md5 = digests
    if expected.size is not None and size != expected.size:
        return f"{size:,} bytes, registered {expected.size:,}"
    if expected.sha256 and sha256 != expected.sha256.lower():
        return f"sha256 {sha256}, registered {expected.sha256}"
    if expected.md5 and md5 != expected.md5.lower():
        return f"md5 {md5}, registered {expected.md5}"
    return None


class _Progress:
    """Bytes counted in KiB on a ProgressLines line: rate and ETA of this run's bytes."""

    def __init__(self, label: str, remaining: int | None, every_s: float):
        self.lines = ProgressLines(label, (remaining or 0) >> 10, "KiB", every_s)
        self.bytes = 0

    def add(self, n: int) -> None:
        before = self.bytes >> 10
        self.bytes += n
        if (self.bytes >> 10) > before:
            self.lines.advance((self.bytes >> 10) - before)


def _open(url: str, start: int, timeout_s: float) -> http.client.HTTPResponse:
    url = urllib.parse.quote(url, safe=":/?#[]@!$&'()*+,;=%~")  # e.g. QuickDraw's spaces
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    if start:
        request.add_header("Range", f"bytes={start}-")
    return urllib.request.urlopen(request, timeout=timeout_s)  # noqa: S310 (http(s) URLs only)


def _content_total(response, start: int) -> int | None:
    """The full file size the response implies (Content-Range, else Content-Length)."""
    content_range = response.headers.get("Content-Range", "")
    if "/" in content_range and content_range.rsplit("/", 1)[1].strip().isdigit():
        return int(content_range.rsplit("/", 1)[1])
    length = response.headers.get("Content-Length")
    if length and length.isdigit():
        return int(length) + (start if response.status == 206 else 0)
    return None


def _one_try(url: str, part: Path, expected: Expected, options: FetchOptions, label: str) -> None:
    """Continue `part` from its size to the end of the file (a fault raises)."""
    start = part.stat().st_size if part.exists() else 0
    if expected.size is not None and start >= expected.size:
        return  # complete (or too long: the check after names it)
    try:
        response = _open(url, start, options.timeout_s)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and start:  # nothing past `start`: the part already holds it all
            return
        raise
    with response:
        if start and response.status != 206:
            start = 0  # the server ignored Range: it sends the whole file again
        total = _content_total(response, start) or expected.size
        if expected.size is not None and total is not None and total != expected.size:
            raise FetchError(
                f"{url}: the server offers {total:,} bytes, registered {expected.size:,}; "
                "check --mirror or the registration"
            )
        progress = _Progress(label, (total - start) if total else None, options.progress_every_s)
        with part.open("r+b" if start else "wb") as handle:
            handle.seek(start)
            handle.truncate()
            received = 0
            while True:
                data = response.read1(CHUNK)  # what has arrived: a stall keeps it
                if not data:
                    break
                write_chunk(handle, data)
                received += len(data)
                progress.add(len(data))
        if total is not None and start + received < total:
            raise http.client.IncompleteRead(b"", total - start - received)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "no data within the timeout"
    if isinstance(exc, urllib.error.URLError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else exc
        if isinstance(exc, (socket.timeout, TimeoutError)):
            return "no data within the timeout"
    if isinstance(exc, http.client.IncompleteRead):
        return "the connection closed before the end of the file"
    return str(exc) or type(exc).__name__


NETWORK_FAULTS = (
    urllib.error.URLError,
    http.client.HTTPException,
    ConnectionError,
    socket.timeout,
    TimeoutError,
)


def fetch(
    url: str,
    target: Path,
    expected: Expected,
    options: FetchOptions = FetchOptions(),
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[int, str, str]:
    """Download `url` to `target` through `target.part`, verify it, rename it into place;
    returns the file's (size, sha256, md5).

    Keeps the part on network faults, Ctrl-C and write errors (the next call resumes it);
    removes it on a size or digest mismatch. FetchError (one line naming the URL) when the
    tries are spent or the bytes are wrong; an OSError of the disk propagates."""
    target = Path(target)
    part = part_path(target)
    label = target.name
    tries = options.retries + 1
    for attempt in range(1, tries + 1):
        try:
            _one_try(url, part, expected, options, label)
            break
        except urllib.error.HTTPError as exc:
            if exc.code < 500 and exc.code not in RETRIED_4XX or attempt == tries:
                raise FetchError(f"{url}: {_reason(exc)} (tried {attempt}x)") from None
            fault = exc
        except NETWORK_FAULTS as exc:
            if attempt == tries:
                raise FetchError(
                    f"{url}: {_reason(exc)} after {tries} tries; {_left(part)}"
                ) from None
            fault = exc
        delay = min(options.backoff_s * 2 ** (attempt - 1), options.max_backoff_s)
        print(
            f"[{label}] {_reason(fault)}; retry {attempt}/{options.retries} in {delay:g}s",
            file=sys.stderr,
            flush=True,
        )
        sleep(delay)
    digests = file_digests(part, label, options.progress_every_s)
    wrong = mismatch(expected, digests)
    if wrong is not None:
        part.unlink(missing_ok=True)
        raise FetchError(
            f"{url} served {wrong}; the partial file was removed (a wrong file or a bad "
            "--mirror: check the URL, then run again)"
        )
    os.replace(part, target)
    return digests
