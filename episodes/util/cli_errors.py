"""One way for every `python -m` command to end on a fault: one line saying what to do, no traceback.

A command's `main(argv) -> int` raises; `run_main` (and, for in-process callers, the
`@user_faults` guard on `main`) prints the one `error: ...` line and returns the exit code.
What is one line is decided here, once: a `UserError` (the root of every exception the user
can fix: a bad value, a missing input, an existing output), an OSError of a path
(`PATH_ERRNOS`: missing, unreadable, unwritable, full ...), an unwritable output that a library
re-raised as another exception, and Ctrl-C. Anything else, a plain ValueError or KeyError
included, is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from episodes.util.termination import interrupt_on_termination, interrupt_status

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "PATH_ERRNOS",
    "UNWRITABLE",
    "OutputExistsError",
    "UsageError",
    "UserError",
    "UserErrors",
    "fault_line",
    "interrupt_behind",
    "os_error_line",
    "run_main",
    "unwritable_cause",
    "user_fault_lines",
    "user_faults",
]

EXIT_USAGE = 2  # bad input or environment: the user can fix it (argparse uses 2 too)
# An output that cannot be written: one line even when a library wraps the OSError (Beam does).
UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
# The OSErrors of a path the user named or can fix: one line; any other OSError is a bug (or a
# fault a library should have turned into a UserError) and keeps its traceback.
PATH_ERRNOS = frozenset(
    {
        *UNWRITABLE,
        errno.ENOENT,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.EEXIST,
        errno.ENAMETOOLONG,
        errno.ELOOP,
    }
)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C (143 = 128 + SIGTERM)


MainFunction = TypeVar("MainFunction", bound=Callable[..., int])


class UserError(Exception):
    """A fault the user can fix; its message is the one line printed (name the path or value).

    The root of the toolkit's user-fault exceptions: each package's error (SpecError,
    LayoutError, SplitFileError, ...) derives from it and keeps a built-in second base
    (ValueError, OSError) so that `except ValueError` around a library call still works."""


class UserErrors(UserError):
    """Several faults of one run that each get their `error:` line (the files of a download
    that could not be fetched): `UserErrors(lines)`, `lines` the messages in order."""

    def __init__(self, lines: Sequence[str]):
        self.lines = [str(line) for line in lines]
        super().__init__("; ".join(self.lines))

    def __reduce__(self) -> tuple[Any, ...]:  # pickled (a worker process) with its lines
        return (type(self), (self.lines,))


class UsageError(UserError, ValueError):
    """Flags that do not fit together or a value a command cannot take (the message names the
    flags and values)."""


class OutputExistsError(UserError, FileExistsError):
    """An output (folder, file or object-storage prefix) exists and --overwrite was not given."""


def os_error_line(exc: OSError) -> str:
    """One line for an OSError: the path, what went wrong and, where obvious, what to do."""
    path = exc.filename if exc.filename is not None else ""
    reason = exc.strerror or str(exc)
    hint = {
        errno.EACCES: "check the folder's permissions or choose another --output",
        errno.EPERM: "check the folder's permissions or choose another --output",
        errno.EROFS: "the file system is read-only; choose another --output",
        errno.ENOSPC: "free some space or choose another --output",
        errno.ENOENT: "check the path",
    }.get(exc.errno or -1)
    line = f"{path}: {reason}" if path else reason
    return f"{line} ({hint})" if hint else line


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what it was raised from or while handling, and so on (each once)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def unwritable_cause(exc: BaseException) -> OSError | None:
    """The OSError with an unwritable-output errno behind `exc` (itself, a cause or context)."""
    for current in _chain(exc):
        if isinstance(current, OSError) and current.errno in UNWRITABLE:
            return current
    return None


def interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM a library turned into another error, if `exc` is one: torch.save
    interrupted mid-write, say, raises RuntimeError("unexpected pos ...") while handling it."""
    for current in _chain(exc):
        if isinstance(current, KeyboardInterrupt):
            return current
    return None


def fault_line(exc: BaseException) -> str:
    """The one line printed for a user fault: an OSError as `os_error_line`, else its message."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return os_error_line(exc)
    return str(exc)


def user_fault_lines(exc: BaseException) -> list[str]:
    """The `error:` lines of `exc` if it is a user fault (module docstring): one, or one per
    fault of a `UserErrors`; none for a bug."""
    if isinstance(exc, UserErrors):
        return exc.lines
    if isinstance(exc, UserError):
        return [fault_line(exc)]
    if isinstance(exc, OSError) and exc.errno in PATH_ERRNOS:
        return [os_error_line(exc)]
    cause = unwritable_cause(exc)
    return [] if cause is None else [os_error_line(cause)]


def _print_fault(lines: Sequence[str]) -> int:
    for line in lines:
        print(f"error: {line}", file=sys.stderr)
    return EXIT_USAGE


def _guard(main: MainFunction, legacy: tuple[type[BaseException], ...]) -> MainFunction:
    @functools.wraps(main)
    def guarded(*args: Any, **kwargs: Any) -> int:
        try:
            return main(*args, **kwargs)
        except Exception as exc:
            lines = user_fault_lines(exc)
            if not lines and legacy and isinstance(exc, legacy):
                lines = [fault_line(exc)]
            if not lines:
                raise
            return _print_fault(lines)

    guarded.user_fault_types = legacy  # type: ignore[attr-defined]
    return guarded  # type: ignore[return-value]


def user_faults(*main_or_types: Any) -> Any:
    """Decorator for a command's `main`: a user fault (`user_fault_lines`) ends as one
    `error: ...` line on stderr and exit status 2, as under `run_main`; a bug is re-raised.

    `main` keeps returning its status when called from Python (tests, other commands);
    `run_main` adds Ctrl-C around it when run as `python -m`. `@user_faults(SomeError, ...)`,
    the older form that also printed the listed types in one line, is kept only for the
    learners' commands until they move onto the one error root (issue 35)."""
    if len(main_or_types) == 1 and not isinstance(main_or_types[0], type):
        return _guard(main_or_types[0], ())
    legacy = tuple(main_or_types)
    return lambda main: _guard(main, legacy)


def _interrupts_unwrapped(main: Callable[[Sequence[str] | None], int], argv) -> int:
    """`main(argv)`, with a Ctrl-C or SIGTERM that a library wrapped raised as itself again."""
    try:
        return main(argv)
    except Exception as exc:
        if interrupt_behind(exc) is None:
            raise
        raise KeyboardInterrupt from None


def run_main(
    main: Callable[[Sequence[str] | None], int],
    argv: Sequence[str] | None = None,
    *,
    interrupted: str | Callable[[], str] = "interrupted",
) -> int:
    """Run `main(argv)`; user faults (`user_fault_lines`) and Ctrl-C or SIGTERM end in one
    stderr line and an exit code (2; 130 after Ctrl-C, 143 after SIGTERM); bugs keep their
    traceback. `interrupted` is the line printed on Ctrl-C (e.g. how to resume)."""
    interrupt_on_termination()  # SIGTERM (timeout, docker stop, Slurm) ends it as Ctrl-C does
    try:
        return _interrupts_unwrapped(main, argv)
    except KeyboardInterrupt:
        line = interrupted() if callable(interrupted) else interrupted
        print(f"\n{line}", file=sys.stderr)
        return interrupt_status()
    except BrokenPipeError:  # `python -m ... | head`: quiet exit, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        lines = user_fault_lines(exc)
        if not lines:
            raise
        return _print_fault(lines)
