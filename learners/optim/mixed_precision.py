"""Mixed precision (`--amp`) and the channels-last layout (`--channels-last`) of a training run.

`bf16` and `fp16` run each training step's forward pass and loss under `torch.autocast`
(weights, optimiser state and the backward pass stay float32); `fp16` also scales the loss with
a `GradScaler` so small gradients do not underflow, and the scaler's state is saved in every
checkpoint. The MAML family's inner-loop gradients are not scaled: prefer `bf16` there.
`channels_last` stores convolution weights and input images NHWC in memory, which tensor-core
convolutions (ResNets on a GPU under AMP) run faster; values are unchanged up to rounding.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import Any

import torch

from learners import LearnerConfigError

__all__ = ["AMP_MODES", "check_amp_mode", "memory_format", "MixedPrecision"]

AMP_MODES = ("off", "bf16", "fp16")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def check_amp_mode(mode: str) -> str:
    if mode not in AMP_MODES:
        raise LearnerConfigError(f"--amp {mode!r}: expected one of {', '.join(AMP_MODES)}")
    return mode


class MixedPrecision:
    """Autocast context and (for fp16) loss scaling of one learner on one device type."""

    def __init__(self, mode: str = "off", device_type: str = "cpu"):
        self.mode = check_amp_mode(mode)
        self.device_type = device_type
        self.scaler: torch.amp.GradScaler | None = None
        if mode == "fp16":
            self.scaler = torch.amp.GradScaler(device_type)

    def autocast(self) -> AbstractContextManager[Any]:
        """The context for a forward pass and its loss (nothing at all when AMP is off)."""
        if self.mode == "off":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=_DTYPES[self.mode])

    def backward_and_step(self, loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        """Backward pass and optimiser step, through the loss scaler for fp16."""
        if self.scaler is None:
            loss.backward()
            optimizer.step()
            return
        self.scaler.scale(loss).backward()
        self.scaler.step(optimizer)
        self.scaler.update()

    def state_dict(self) -> dict[str, Any]:
        return {} if self.scaler is None else self.scaler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)


def memory_format(channels_last: bool) -> torch.memory_format:
    return torch.channels_last if channels_last else torch.contiguous_format
