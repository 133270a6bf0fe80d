"""Ctrl-C or SIGTERM during a Beam job of a command: stop at once, clean up, one line, exit
130 (143 after SIGTERM: what `timeout`, `docker stop` and Slurm send).

Unwinding a KeyboardInterrupt through Beam's runner waits for its worker threads, gRPC
servers and worker processes, and every one of them prints its own traceback. While a command's
pipeline runs, `exit_on_interrupt` replaces that: the first Ctrl-C silences further output,
kills the job's worker processes, runs the command's cleanup (remove the staging folder, free
the output lock), prints one line and ends the process. A second Ctrl-C changes nothing.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from episodes.util.termination import STOP_SIGNALS, note_signal, on_stop_signals, restore_handlers

__all__ = ["descendant_pids", "exit_on_interrupt", "interrupts_deferred"]


def descendant_pids(root: int | None = None) -> list[int]:
    """The processes started (directly or not) by `root` (default: this one); Linux /proc.
    Elsewhere none are found and the workers end themselves (beam_pipelines.runners.local_worker)."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@contextmanager
def exit_on_interrupt(cleanup: Callable[[], None], line: str | Callable[[], str]) -> Iterator[None]:
    """Within the block, Ctrl-C (SIGINT) or SIGTERM ends the process: workers killed,
    `cleanup()` run, `line` printed on stderr, exit status 128 + the signal. Only in the main
    thread (signals go there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        for other in STOP_SIGNALS:  # a second Ctrl-C (or SIGTERM) changes nothing
            signal.signal(other, signal.SIG_IGN)
        stderr = os.dup(2)
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)  # other threads' tracebacks and progress lines end here
        os.dup2(quiet, 2)
        status = 128 + signum  # 130 after Ctrl-C, 143 after SIGTERM
        message = line() if callable(line) else line
        try:
            _kill(descendant_pids())
            cleanup()
        except BaseException as exc:  # still one line, naming what was left behind
            message = f"{message}; cleanup failed: {exc}"
            status = 1
        os.write(stderr, f"\n{message}\n".encode())
        os._exit(status)

    previous = on_stop_signals(stop)
    try:
        yield
    finally:
        restore_handlers(previous)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C back while the block runs (e.g. the two renames that publish an output):
    a KeyboardInterrupt is raised once it ended."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = on_stop_signals(lambda signum, _frame: received.append(signum))
    try:
        yield
    finally:
        restore_handlers(previous)
    if received:
        note_signal(received[-1])
        raise KeyboardInterrupt
