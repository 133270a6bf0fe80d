"""A Beam job whose output cannot be written (a full disk, a quota, a read-only file system)
ends in one line naming the output, like any unwritable output.

The worker that hits ENOSPC raises an OSError, but Beam hands it to the launcher as the text of
a RuntimeError (from another process: no exception chain), after every worker and the job
service logged it with its traceback (hundreds of lines). While a job runs,
`unwritable_output_in_one_line` drops the log records that carry such an error (the line
printed at the end says it) and turns the job's failure into an OSError naming the output.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

from episodes.util.cli_errors import UNWRITABLE

__all__ = [
    "quiet_unwritable_records",
    "QuietStderr",
    "UNWRITABLE_ERRNOS",
    "unwritable_in_exception",
    "unwritable_in_text",
    "unwritable_output_in_one_line",
    "UnwritableRecordFilter",
]

# "[Errno 28] No space left on device" in an exception's or a log record's text
_ERRNO_TEXT = re.compile(r"\[Errno (\d+)\] ([^:'\"\[\]\n\\]+)")
UNWRITABLE_ERRNOS = (*UNWRITABLE, errno.EDQUOT, errno.EFBIG)


def unwritable_in_text(text: str) -> tuple[int, str] | None:
    """(errno, strerror) of the first unwritable-output error named in `text`."""
    for match in _ERRNO_TEXT.finditer(text):
        code = int(match.group(1))
        if code in UNWRITABLE_ERRNOS:
            return code, match.group(2).strip()
    return None


def unwritable_in_exception(exc: BaseException) -> tuple[int, str] | None:
    """The unwritable-output error behind `exc`: an OSError in its chain, or one named in the
    text of an exception that crossed a process boundary."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in UNWRITABLE_ERRNOS:
            return current.errno, current.strerror or os.strerror(current.errno)
        found = unwritable_in_text(str(current))
        if found is not None:
            return found
        current = current.__cause__ or current.__context__
    return None


class UnwritableRecordFilter(logging.Filter):
    """Drops log records (and their tracebacks) about an unwritable output."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += str(record.exc_info[1])
        return unwritable_in_text(text) is None


_QUIET = UnwritableRecordFilter()
_handle = logging.Handler.handle


def _quiet_handle(self: logging.Handler, record: logging.LogRecord) -> bool:
    return _QUIET.filter(record) and _handle(self, record)


def quiet_unwritable_records(quiet: bool = True) -> None:
    """Every logging handler (also those Beam adds while a job runs, and the one that relays a
    worker's records to its launcher) drops records about an unwritable output, or no longer."""
    logging.Handler.handle = _quiet_handle if quiet else _handle  # type: ignore[method-assign]


class QuietStderr:
    """A worker's sys.stderr without the tracebacks Beam prints itself (not through logging)
    for an unwritable output; everything else passes."""

    def __init__(self, stream):
        self._stream = stream
        self._dropped = False

    def write(self, text: str) -> int:
        # print() writes its end ("\n") apart: it goes with the text it ends
        if unwritable_in_text(text) is not None or (self._dropped and text == "\n"):
            self._dropped = text != "\n"
            return len(text)
        self._dropped = False
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextmanager
def unwritable_output_in_one_line(output: str | os.PathLike) -> Iterator[None]:
    """Within the block, records about an unwritable output are not logged, and an exception
    caused by one becomes `OSError(errno, strerror, output)` (one `error:` line by run_main)."""
    quiet_unwritable_records()
    try:
        yield
    except Exception as exc:
        found = unwritable_in_exception(exc)
        if found is None:
            raise
        raise OSError(found[0], found[1], str(output)) from None
    finally:
        quiet_unwritable_records(False)
