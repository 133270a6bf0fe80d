"""SIGTERM treated as Ctrl-C: what `timeout`, `docker stop`, Slurm and systemd send ends a
command the way Ctrl-C does (its cleanup runs, one line, no traceback).

Python raises KeyboardInterrupt for SIGINT but lets SIGTERM kill the process on the spot: no
`finally`, no `atexit`, so staging folders and shared-memory segments stay behind. `run_main`
installs `interrupt_on_termination` for every `python -m` command: SIGTERM then raises
KeyboardInterrupt in the main thread, and `interrupt_status()` gives the exit status a shell
reports for the signal received (130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

__all__ = [
    "STOP_SIGNALS",
    "interrupt_on_termination",
    "interrupt_status",
    "note_signal",
    "on_stop_signals",
    "restore_handlers",
]

# The signals a command ends on as on Ctrl-C.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []


def _raise_interrupt(signum: int, _frame: Any) -> None:
    _received.append(signum)
    raise KeyboardInterrupt


def interrupt_on_termination() -> bool:
    """SIGTERM raises KeyboardInterrupt in the main thread from now on (SIGINT keeps raising it
    too, remembering which came). Only from the main thread, and only over the default
    handlers (a handler someone else installed stays); returns whether it was installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    installed = False
    for signum in STOP_SIGNALS:
        current = signal.getsignal(signum)
        if current in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(signum, _raise_interrupt)
            installed = True
    return installed


def note_signal(signum: int) -> None:
    """Record a stop signal handled elsewhere (a command's own handler), for `interrupt_status`."""
    _received.append(signum)


def interrupt_status() -> int:
    """The exit status for an interrupted command: 128 + the last stop signal (130 when none
    was recorded, as for a KeyboardInterrupt raised by other means)."""
    return 128 + (_received[-1] if _received else signal.SIGINT)


def on_stop_signals(handler: Callable[[int, Any], Any]) -> dict[int, Any]:
    """Install `handler` for every stop signal; returns the previous handlers (to restore with
    `restore_handlers`)."""
    return {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}


def restore_handlers(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)
