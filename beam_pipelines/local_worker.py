"""`python -m beam_pipelines.local_worker`: one worker process of the local runner with
`--direct_num_workers N > 1` (Beam's SDK harness, started by beam_pipelines.runner_options).

Beam's plain harness command turns a Ctrl-C into a KeyboardInterrupt traceback plus gRPC
errors in every worker, and prints start-up warnings meant for cluster workers. Here:
- Ctrl-C ends a worker quietly, STOP_AFTER_CTRL_C_S seconds later (the CLIs' launcher kills
  its workers at once and reports the interruption in one line; a launcher that unwinds
  Beam's runner instead waits for them at most this long);
- a worker whose launcher is gone (even after kill -9) exits within a second instead of
  writing on into a staging folder nobody will publish;
- the worker's own stderr shows errors only, and not a full disk's (the launcher names the
  output in one line; beam_pipelines.job_faults); its warnings still reach the launcher, which
  shows them when `--default_sdk_harness_log_level` is given).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

from beam_pipelines.job_faults import QuietStderr, quiet_unwritable_records

PARENT_POLL_S = 0.5
STOP_AFTER_CTRL_C_S = 2


def _stop_soon(_signum, _frame) -> None:
    signal.alarm(STOP_AFTER_CTRL_C_S)  # SIGALRM's default action ends the process, silently


def _exit_when_orphaned(launcher: int) -> None:
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != launcher:
            os._exit(1)


def main() -> None:
    signal.signal(signal.SIGINT, _stop_soon)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    threading.Thread(
        target=_exit_when_orphaned, args=(os.getppid(),), name="orphan-watch", daemon=True
    ).start()
    errors_only = logging.StreamHandler()
    errors_only.setLevel(logging.ERROR)
    quiet_unwritable_records()  # a full disk: the launcher names the output in one line
    sys.stderr = QuietStderr(sys.stderr)
    logging.getLogger().addHandler(errors_only)
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main(sys.argv)


if __name__ == "__main__":
    main()
