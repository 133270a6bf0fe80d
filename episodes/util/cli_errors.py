"""One way for every `python -m` command to end on a fault: one line saying what to do, no traceback.

A command's `main(argv) -> int` runs inside `run_main`. Faults a user can fix (bad input, a
missing or unwritable path, Ctrl-C) become one `error: ...` line on stderr and an exit code;
an unwritable output stays one line when a library re-raises it as another exception. Anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from episodes.util.termination import interrupt_on_termination, interrupt_status

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "UNWRITABLE",
    "UserError",
    "fault_line",
    "interrupt_behind",
    "os_error_line",
    "run_main",
    "unwritable_cause",
    "user_faults",
]

EXIT_USAGE = 2  # bad input or environment: the user can fix it (argparse uses 2 too)
# An output that cannot be written: one line even when a library wraps the OSError (Beam does).
UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C (143 = 128 + SIGTERM)


MainFunction = TypeVar("MainFunction", bound=Callable[..., int])


class UserError(Exception):
    """A fault the user can fix; its message is the one line printed (name the path or value)."""


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


def user_faults(*errors: type[BaseException]) -> Callable[[MainFunction], MainFunction]:
    """Decorator for a command's `main`: an exception of `errors` (the command's own fault
    types) or a `UserError` ends as one `error: ...` line on stderr and exit status 2.

    `main` keeps returning its status when called from Python (tests, other commands);
    `run_main` adds Ctrl-C and unwritable outputs around it when run as `python -m`."""

    def decorate(main: MainFunction) -> MainFunction:
        @functools.wraps(main)
        def guarded(*args, **kwargs) -> int:
            try:
                return main(*args, **kwargs)
            except (UserError, *errors) as exc:
                print(f"error: {fault_line(exc)}", file=sys.stderr)
                return EXIT_USAGE

        return guarded  # type: ignore[return-value]

    return decorate


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
    extra_errors: tuple[type[BaseException], ...] = (),
) -> int:
    """Run `main(argv)`; user faults and Ctrl-C or SIGTERM end in one stderr line and an exit
    code (130 after Ctrl-C, 143 after SIGTERM).

    `interrupted` is the line printed on Ctrl-C (e.g. how to resume); `extra_errors` are the
    calling package's own user-fault exception types, printed by their message.
    """
    interrupt_on_termination()  # SIGTERM (timeout, docker stop, Slurm) ends it as Ctrl-C does
    try:
        return _interrupts_unwrapped(main, argv)
    except KeyboardInterrupt:
        line = interrupted() if callable(interrupted) else interrupted
        print(f"\n{line}", file=sys.stderr)
        return interrupt_status()
    except (UserError, *extra_errors) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `python -m ... | head`: quiet exit, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        if exc.errno is None:
            raise
        print(f"error: {os_error_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        cause = unwritable_cause(exc)
        if cause is None:
            raise
        print(f"error: {os_error_line(cause)}", file=sys.stderr)
        return EXIT_USAGE
