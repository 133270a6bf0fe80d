"""Meta-Dataset's resize, in numpy: TF1 `resize_bilinear` with `align_corners=True`.

The reference decoder (meta_dataset/data/decoder.py) decodes the full image and calls
`tf.compat.v1.image.resize_images(image, [S, S], BILINEAR, align_corners=True)`: corner pixels map
onto corner pixels, each output pixel interpolates its 4 nearest source pixels with no
antialiasing, in float32 as TF's kernel computes it (scale (in-1)/(out-1); top = tl + (tr-tl)*x,
bottom likewise, top + (bottom-top)*y). Our uint8 output rounds that float to the nearest
integer (the reference keeps it as a float: at most 0.5/255 apart).
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["reference_resize_into"]


@functools.lru_cache(maxsize=256)
def _axis(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower index, upper index, float32 weight of upper) of each output position."""
    if out_size > 1:
        scale = np.float32(in_size - 1) / np.float32(out_size - 1)
    else:
        scale = np.float32(in_size) / np.float32(out_size)
    where = np.arange(out_size, dtype=np.float32) * scale
    lower = np.floor(where)
    upper = np.minimum(np.ceil(where), in_size - 1).astype(np.intp)
    weight = (where - lower).astype(np.float32)
    return np.maximum(lower, 0).astype(np.intp), upper, weight


def reference_resize_into(pixels: np.ndarray, out: np.ndarray) -> None:
    """Resize (H, W, C) uint8 `pixels` into `out` (S, S, C) uint8 like the reference decoder."""
    height, width = pixels.shape[:2]
    out_h, out_w = out.shape[:2]
    if (height, width) == (out_h, out_w):  # scale 1, weights 0: the image itself
        out[...] = pixels
        return
    top_rows, bottom_rows, y_weight = _axis(height, out_h)
    left, right, x_weight = _axis(width, out_w)
    x_weight = x_weight[None, :, None]
    rows = []
    for index in (top_rows, bottom_rows):
        band = pixels[index]  # only the source rows the output needs
        lo = band[:, left].astype(np.float32)
        hi = band[:, right].astype(np.float32)
        rows.append(lo + (hi - lo) * x_weight)
    top, bottom = rows
    result = top + (bottom - top) * y_weight[:, None, None]
    np.rint(result, out=result)
    np.clip(result, 0, 255, out=result)
    out[...] = result.astype(np.uint8)
