"""Device choice (`--device auto`) and the switches that make torch runs reproducible."""

from __future__ import annotations

import os

import torch


def resolve_device(name: str = "auto") -> torch.device:
    """`auto` -> CUDA when present, CPU otherwise; any other value must be a valid torch device."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise ValueError(
            f"--device {name!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'"
        ) from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name!r}: CUDA is not available on this machine")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ValueError(
            f"--device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)"
        )
    if device.type not in ("cpu", "cuda"):  # mps, xpu, meta, ...: never tested here
        raise ValueError(f"--device {name!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'")
    return device


def make_deterministic(seed: int) -> None:
    """Seed torch and ask for deterministic kernels, so a run is a function of its seed."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
