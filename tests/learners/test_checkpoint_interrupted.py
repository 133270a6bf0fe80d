"""A checkpoint save stopped by Ctrl-C or SIGTERM mid-write (issue 25, item 2): torch raises
RuntimeError("unexpected pos") then, which ended `learners.train` in a traceback and exit 1
instead of its resume line and 143. The save raises KeyboardInterrupt and leaves no file."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from learners.training.training_loop import _atomic_save

# Delays after which SIGINT lands during the write of ~80 MB (the first ones land while torch
# still pickles, the later ones while it writes records: both must end as an interrupt).
DELAYS_S = (0.002, 0.005, 0.01, 0.02, 0.05)


@pytest.mark.parametrize("delay", DELAYS_S)
def test_an_interrupted_save_raises_keyboard_interrupt_and_leaves_nothing(
    tmp_path: Path, delay: float
) -> None:
    payload = {"weights": [torch.zeros(1000, 1000) for _ in range(20)]}
    path = tmp_path / "step_2.pt"
    timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            _atomic_save(payload, path)
            time.sleep(5)  # the save was quicker than the delay: the signal lands here
    finally:
        timer.cancel()
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["step_2.pt"])
    if path.exists():  # finished before the signal: complete and loadable
        assert len(torch.load(path)["weights"]) == 20
