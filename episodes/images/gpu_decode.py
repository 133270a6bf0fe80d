"""JPEG records decoded on a CUDA GPU: nvJPEG through `torchvision.io.decode_jpeg` on a list of
an episode's images (one batched call), then the reference resize on the GPU.

Opt-in (`EpisodeReader(decode_device="cuda")`); the default stays the CPU path, whose pixels
are the reference reader's. The resize here is the same arithmetic as
`reference_resize.reference_resize_into` (TF1 bilinear, align_corners, float32, the same
operation order, then round half to even): given the same decoded pixels it gives the same
bytes (tests/episodes/test_gpu_decode.py checks this on the CPU). What differs is the decode itself:
nvJPEG's IDCT and chroma upsampling against libjpeg-turbo's INTEGER_FAST with fancy
upsampling; that difference is measured on a GPU (`benchmarks/train_feed.py --decode-device
cuda` prints its mean and max |diff|). Images that are not JPEG (PNG records) are decoded on the
CPU by the reference path and copied up.

torch and torchvision are imported only when this path is used (the reader needs neither).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from episodes.images.image_decode import decode_image
from episodes.images.reference_resize import _axis

__all__ = ["GpuJpegDecoder", "gpu_decode_problem", "reference_resize_torch"]


def gpu_decode_problem(device: str = "cuda") -> str | None:
    """None when JPEGs can be decoded on `device`, else why not (one line)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not str(device).startswith("cuda"):
        return f"device {device!r}: GPU decoding needs a CUDA device"
    if not torch.cuda.is_available():
        return "CUDA is not available on this machine (torch.cuda.is_available() is False)"
    try:
        from torchvision.io import decode_jpeg  # noqa: F401
    except Exception as exc:  # ImportError, or a torchvision built for another torch
        return (
            f"torchvision does not load ({type(exc).__name__}: {exc}); install the build "
            "matching torch (BUILD.md, GPU install)"
        )
    return None


@functools.lru_cache(maxsize=512)
def _axis_tensors(in_size: int, out_size: int, device: str) -> tuple[Any, Any, Any]:
    import torch

    lower, upper, weight = _axis(in_size, out_size)
    return (
        torch.from_numpy(lower).to(device),
        torch.from_numpy(upper).to(device),
        torch.from_numpy(weight).to(device),
    )


def reference_resize_torch(pixels: Any, size: int) -> Any:
    """(H, W, 3) uint8 tensor -> (size, size, 3) uint8 on its device, with the reference
    resize's arithmetic (`reference_resize.reference_resize_into`, same float32 steps)."""
    import torch

    height, width = int(pixels.shape[0]), int(pixels.shape[1])
    if (height, width) == (size, size):
        return pixels.clone()
    device = str(pixels.device)
    top_rows, bottom_rows, y_weight = _axis_tensors(height, size, device)
    left, right, x_weight = _axis_tensors(width, size, device)
    x_weight = x_weight[None, :, None]
    rows = []
    for index in (top_rows, bottom_rows):
        band = pixels.index_select(0, index)
        lo = band.index_select(1, left).to(torch.float32)
        hi = band.index_select(1, right).to(torch.float32)
        rows.append(lo + (hi - lo) * x_weight)
    top, bottom = rows
    result = top + (bottom - top) * y_weight[:, None, None]
    return torch.round(result).clamp_(0, 255).to(torch.uint8)


class GpuJpegDecoder:
    """Encoded images -> (B, size, size, 3) uint8 tensor on a CUDA device (module docstring)."""

    def __init__(self, size: int, device: str = "cuda"):
        why_not = gpu_decode_problem(device)
        if why_not is not None:
            raise RuntimeError(f"decode_device={device!r}: {why_not}")
        self.size = size
        self.device = device

    def decode(self, encoded: Sequence[bytes]) -> Any:
        import torch
        from torchvision.io import ImageReadMode, decode_jpeg

        shape = (len(encoded), self.size, self.size, 3)
        out = torch.empty(shape, dtype=torch.uint8, device=self.device)  # no host copy sent up
        jpegs = [i for i, data in enumerate(encoded) if data[:2] == b"\xff\xd8"]
        if jpegs:
            inputs = [torch.frombuffer(bytearray(encoded[i]), dtype=torch.uint8) for i in jpegs]
            decoded = decode_jpeg(inputs, mode=ImageReadMode.RGB, device=self.device)
            for i, image in zip(jpegs, decoded):
                out[i] = reference_resize_torch(image.permute(1, 2, 0), self.size)
        jpeg_set = set(jpegs)
        others = [i for i in range(len(encoded)) if i not in jpeg_set]
        if others:
            host = np.stack([decode_image(encoded[i], self.size) for i in others])
            out[others] = torch.from_numpy(host).to(self.device)
        return out
