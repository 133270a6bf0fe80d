"""Helper processes that start from any script: a fresh interpreter that never imports `__main__`.

`multiprocessing`'s spawn and forkserver methods re-import the caller's main module in every
child, so a script that builds a reader at top level (no `if __name__ == "__main__":` guard, as
notebooks turned into scripts are) re-runs itself in each worker and dies while bootstrapping;
`fork` is unsafe once threads run. A `WorkerProcess` instead runs `python -c` with the parent's
`sys.path`, connected by a socket pair, and calls a named function `module:function(conn, *args)`
there: only that module is imported. Workers ignore Ctrl-C (the parent stops them) and exit when
the parent's end of the connection closes, so they never outlive it.
"""

from __future__ import annotations

import importlib
import multiprocessing.spawn
import os
import signal
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["WorkerProcess", "can_start_workers", "interpreter", "serve"]

_BOOTSTRAP = "import sys; sys.path[:] = {path!r}; from episodes.util.worker_processes import serve; serve({fd})"


def serve(fd: int) -> None:
    """Child side: receive (target, args) on the connection, then run target(conn, *args)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    conn = Connection(fd)
    try:
        target, args = conn.recv()
    except (EOFError, OSError):  # the parent went away before sending the work
        return
    module_name, function_name = target.split(":")
    function = getattr(importlib.import_module(module_name), function_name)
    try:
        function(conn, *args)
    except (BrokenPipeError, ConnectionResetError, EOFError):
        return  # the parent went away (killed, even by kill -9): nothing to say, nobody to hear


def interpreter() -> str:
    """The Python executable children run (the one multiprocessing would use)."""
    return multiprocessing.spawn.get_executable() or sys.executable


class WorkerProcess:
    """A child interpreter running `target` ("module:function") with (conn, *args); `connection`
    is the parent's end. Mirrors the few `multiprocessing.Process` members the reader uses."""

    def __init__(self, target: str, args: tuple[Any, ...] = (), name: str = "worker"):
        self.name = name
        parent_end, child_end = socket.socketpair()
        # Blocking whatever socket.setdefaulttimeout says (Beam's GCS client sets 60 s, which
        # makes new sockets non-blocking: the child's first recv then failed at once).
        parent_end.setblocking(True)
        child_end.setblocking(True)
        try:
            code = _BOOTSTRAP.format(path=list(sys.path), fd=child_end.fileno())
            self._popen = subprocess.Popen(
                [interpreter(), "-c", code],
                pass_fds=(child_end.fileno(),),
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )
        finally:
            child_end.close()  # the child holds its copy: EOF here once it exits
        self.connection = Connection(parent_end.detach())
        self.connection.send((target, tuple(args)))

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def exitcode(self) -> int | None:
        return self._popen.poll()

    def is_alive(self) -> bool:
        return self._popen.poll() is None

    def join(self, timeout: float | None = None) -> None:
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def terminate(self) -> None:
        if self.is_alive():
            try:
                self._popen.terminate()
            except ProcessLookupError:  # pragma: no cover - exited meanwhile
                pass


def can_start_workers() -> str | None:
    """None when worker processes can start here, else why not (one line)."""
    if os.name != "posix":
        return "worker processes need a POSIX system (they inherit a socket by descriptor)"
    if multiprocessing.current_process().daemon:
        return "this is a daemonic process (a DataLoader worker?), which is a worker already"
    torch_data = sys.modules.get("torch.utils.data")
    if torch_data is not None and torch_data.get_worker_info() is not None:
        return "this is a DataLoader worker, which is a worker process already"
    return None
