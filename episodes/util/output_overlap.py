"""The one rule every command that writes follows: its output is never one of its inputs.

An output that *is* an input, *contains* one (a folder above it) or *lies inside* one would be
replaced, would delete the input when replaced with `--overwrite`, or would be read back as
input on the next run. Each command names its inputs and its output once, before any work, and
`refuse_overlap` ends the command in one line naming both flags and paths, with or without
`--overwrite` (issue 30: `convert --input RAW --output RAW --overwrite` deleted the raw folder).

Local paths are compared after `~`, `..` and symbolic links are resolved (a path that does not
exist yet is resolved as far as it exists); URLs (`s3://bucket/key`, `gs://...`) by scheme,
bucket and key components, so `s3://b/raw` and `s3://b/raw2` do not overlap. `file://` URLs are
local paths. A URL never overlaps a local path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from episodes.util.cli_errors import UserError

__all__ = ["OutputOverlapsInputError", "refuse_overlap", "relation"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

PathLike = str | os.PathLike


class OutputOverlapsInputError(UserError):
    """An output that is, contains or lies inside one of the command's inputs."""


def _parts(path: PathLike) -> tuple[str, ...]:
    """Comparable components of a local path or URL: ('/', 'data', 'raw') for a local path,
    ('s3://', 'bucket', 'key', ...) for a URL; empty components (`a//b`, a trailing `/`) dropped."""
    text = os.fspath(path)
    if _SCHEME.match(text):
        url = urlsplit(text)
        scheme = url.scheme.lower()
        if scheme != "file":
            names = [url.netloc, *unquote(url.path).split("/")]
            return (f"{scheme}://", *(name for name in names if name))
        text = unquote(url.path)
    return Path(os.path.expanduser(text)).resolve(strict=False).parts


def relation(output: PathLike, input_path: PathLike) -> str | None:
    """How `output` overlaps `input_path`: 'is', 'contains', 'lies inside', or None."""
    out, inp = _parts(output), _parts(input_path)
    if out == inp:
        return "is"
    if inp[: len(out)] == out:
        return "contains"
    if out[: len(inp)] == inp:
        return "lies inside"
    return None


def refuse_overlap(
    output: tuple[str, PathLike | None],
    inputs: Iterable[tuple[str, PathLike | None]],
    allowed_inside: Iterable[PathLike] = (),
) -> None:
    """Raise OutputOverlapsInputError if the output (`(flag, path)`) is, contains or lies inside
    any input (`(flag, path)` pairs; a None path is skipped). `allowed_inside`: folders of an
    input that are the output's designed place (an evaluation's `RUN/eval/`), where an output
    may lie; it still may not be the input or contain it."""
    out_flag, out_path = output
    if out_path is None or os.fspath(out_path) == "":
        return
    places = [_parts(p) for p in allowed_inside]
    out_parts = _parts(out_path)
    for in_flag, in_path in inputs:
        if in_path is None or os.fspath(in_path) == "":
            continue
        how = relation(out_path, in_path)
        if how is None:
            continue
        if how == "lies inside" and any(out_parts[: len(p)] == p for p in places):
            continue
        what = "is the same path as" if how == "is" else how
        raise OutputOverlapsInputError(
            f"{out_flag} {os.fspath(out_path)} {what} {in_flag} {os.fspath(in_path)}: "
            f"writing there would replace or mix with the input; choose another {out_flag}, "
            "outside the input"
        )
