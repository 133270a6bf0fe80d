"""Device choice (`--device auto`) and the switches that make torch runs reproducible."""

from __future__ import annotations

import os

import torch

from learners import LearnerConfigError

__all__ = [
    "choose_loading",
    "make_deterministic",
    "MAX_AUTO_LOADER_WORKERS",
    "resolve_device",
    "usable_cores",
]


def resolve_device(name: str = "auto") -> torch.device:
    """`auto` -> CUDA when present, CPU otherwise; any other value must be a valid torch device."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise LearnerConfigError(
            f"--device {name!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'"
        ) from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise LearnerConfigError(f"--device {name!r}: CUDA is not available on this machine")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise LearnerConfigError(
            f"--device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)"
        )
    if device.type not in ("cpu", "cuda"):  # mps, xpu, meta, ...: never tested here
        raise LearnerConfigError(f"--device {name!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'")
    return device


def make_deterministic(seed: int) -> None:
    """Seed torch and ask for deterministic kernels, so a run is a function of its seed."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False


MAX_AUTO_LOADER_WORKERS = 12  # 143 episodes/s on an H200 host from 224x224 JPEG records


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def choose_loading(
    device: torch.device,
    dataset: str,
    loader_workers: int | None,
    decode_processes: int | None,
    cores: int | None = None,
    decode_device: str = "cpu",
) -> tuple[int, int, str | None]:
    """(loader workers, decode processes, the one line saying why or None) for a training run.

    Flags given are kept (the other one 0). Unset, on CUDA with N cores, the data must keep a
    GPU step of ~15 ms fed: N - 2 DataLoader workers, at most 12 (they scaled to 182
    episodes/s with 15 workers on a 16-core H200 host where inline reading gave 22; two cores
    stay for the training process and its copy thread). On a CPU, or for generated data,
    the training process reads (the CPU default, unchanged). Every choice gives the same
    items in the same order (tests/learners/test_training_feed.py), so results do not depend on it.
    With `decode_device="cuda"` the training process reads (GPU decoding runs there)."""
    if loader_workers is not None or decode_processes is not None:
        return loader_workers or 0, decode_processes or 0, None
    if decode_device != "cpu":  # GPU decoding runs in the training process
        return 0, 0, "loading: the training process decodes JPEG records on the GPU"
    if device.type != "cuda" or dataset == "synthetic":
        return 0, 0, None
    cores = usable_cores() if cores is None else cores
    workers = max(0, min(cores - 2, MAX_AUTO_LOADER_WORKERS))
    how = f"{workers} DataLoader worker processes" if workers else "the training process"
    return (
        workers,
        0,
        f"loading: {how} read episodes ahead ({device.type}, {cores} usable cores; "
        "--loader-workers or --decode-processes N choose yourself)",
    )
