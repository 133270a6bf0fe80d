"""`python -m beam_pipelines.runners.local_worker`: one worker process of the local runner with
`--direct_num_workers N > 1` (Beam's SDK harness, started by beam_pipelines.runners.options).

Beam's plain harness command turns a Ctrl-C into a KeyboardInterrupt traceback plus gRPC
errors in every worker, and prints start-up warnings meant for cluster workers. Here:
- Ctrl-C ends a worker quietly, STOP_AFTER_CTRL_C_S seconds later (the CLIs' launcher kills
  its workers at once and reports the interruption in one line; a launcher that unwinds
  Beam's runner instead waits for them at most this long);
- a worker whose launcher is gone (even after kill -9) exits at once (Linux: the kernel's
  parent-death signal), else within a second, instead of writing on into a staging folder
  nobody will publish, and silently: the gRPC errors of its broken connections to the dead
  launcher (a hundred traceback lines from two workers) are dropped once the launcher is gone;
- the worker's own stderr shows errors only, and not a full disk's (the launcher names the
  output in one line; beam_pipelines.runners.job_faults); its warnings still reach the launcher, which
  shows them when `--default_sdk_harness_log_level` is given).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

from beam_pipelines.runners.job_faults import QuietStderr, quiet_unwritable_records

__all__ = [
    "LauncherWatch",
    "main",
    "ORPHAN_GRACE_S",
    "OrphanQuietStderr",
    "PARENT_POLL_S",
    "PR_SET_PDEATHSIG",
    "STOP_AFTER_CTRL_C_S",
]

PARENT_POLL_S = 0.5
STOP_AFTER_CTRL_C_S = 2


def _stop_soon(_signum, _frame) -> None:
    signal.alarm(STOP_AFTER_CTRL_C_S)  # SIGALRM's default action ends the process, silently


ORPHAN_GRACE_S = 2.0  # how long a lost connection waits to learn whether the launcher died
PR_SET_PDEATHSIG = 1


def _exit_when_orphaned(launcher: int) -> None:
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != launcher:
            os._exit(1)


def _die_with_launcher() -> None:
    """Linux: SIGKILL this process when its parent (the launcher) ends, however it ends."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the orphan watch ends it
        pass


def _connection_lost(error: BaseException | None) -> bool:
    """A gRPC error of a channel to the launcher that is no longer there."""
    code = getattr(error, "code", None)
    return callable(code) and getattr(code(), "name", "") == "UNAVAILABLE"


class LauncherWatch:
    """Silence for the errors that only say the launcher is gone: a lost connection waits (at
    most ORPHAN_GRACE_S) until this worker is orphaned and then ends it without a word; when the
    launcher is still there, the error is shown as usual."""

    def __init__(self, launcher: int):
        self.launcher = launcher

    def exit_if_orphaned(self) -> None:
        deadline = time.monotonic() + ORPHAN_GRACE_S
        while time.monotonic() < deadline:
            if os.getppid() != self.launcher:
                os._exit(1)
            time.sleep(0.05)

    def filter(self, record: logging.LogRecord) -> bool:
        """A logging filter: records of a lost connection are dropped once orphaned."""
        if record.exc_info and _connection_lost(record.exc_info[1]):
            self.exit_if_orphaned()
        return True

    def excepthook(self, args: threading.ExceptHookArgs) -> None:
        if _connection_lost(args.exc_value):
            self.exit_if_orphaned()
        threading.__excepthook__(args)


class OrphanQuietStderr(QuietStderr):
    """sys.stderr of a worker: also without Beam's "Logging client failed" lines of a lost
    connection to a launcher that is gone."""

    def __init__(self, stream, watch: LauncherWatch):
        super().__init__(stream)
        self._watch = watch

    def write(self, text: str) -> int:
        if "StatusCode.UNAVAILABLE" in text:
            self._watch.exit_if_orphaned()
        return super().write(text)


def main() -> None:
    signal.signal(signal.SIGINT, _stop_soon)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    launcher = os.getppid()
    _die_with_launcher()
    threading.Thread(
        target=_exit_when_orphaned, args=(launcher,), name="orphan-watch", daemon=True
    ).start()
    watch = LauncherWatch(launcher)
    threading.excepthook = watch.excepthook
    errors_only = logging.StreamHandler()
    errors_only.setLevel(logging.ERROR)
    errors_only.addFilter(watch.filter)
    quiet_unwritable_records()  # a full disk: the launcher names the output in one line
    sys.stderr = OrphanQuietStderr(sys.stderr, watch)
    logging.getLogger().addHandler(errors_only)
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main(sys.argv)


if __name__ == "__main__":
    main()
