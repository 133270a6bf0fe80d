"""The data augmentation of fine-tuning (Dhillon et al., appendix A.4), on normalised tensors.

Per image: a left-right flip with probability 0.5, 4-pixel reflection padding followed by a
random crop back to the original size, and brightness and contrast changes of +-40%. As in the
authors' code (fastai v1 lighting transforms), brightness and contrast act on the logit of the
[0, 1] pixel value: brightness adds logit(c) with c ~ U(0.1, 0.9) (0.5 leaves the image as it
is), contrast multiplies by s, log-uniform in [0.6, 1.4]. The authors' `get_transformations`
(amazon-science/few-shot-baseline) lists `brightness(change=(0.1, 0.9))` before
`contrast(scale=(0.6, 1.4))`; fastai v1 sorts transforms stably by `order` (both lighting
transforms share one) and applies them to one logit tensor, so a pixel x becomes
sigmoid(s * (logit x + logit c)) (the default, `lighting_order="fastai"`); the named deviation
`"contrast_first"` gives sigmoid(s * logit x + logit c), this module's order before issue 24.
The spatial part is a permutation of pixels and the lighting is pointwise, so they commute.

The random draws (`AugmentDraws`) are separate from applying them, so that many episodes can be
augmented in one call while each episode's draws come from its own generator
(`learners.inference.batched_finetune`): with `generator`, draws are made on the CPU from it and copied to
the images' device (the same draws on every device); without, from the global stream on the
images' device. `augmentation_generator` makes a generator the current one for the calls made
inside it (the evaluation loop gives every episode its own).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from learners.feed.episode_batch import Normalization

__all__ = [
    "active_generator",
    "apply_augmentation",
    "apply_flip_and_crop",
    "augment_images",
    "augmentation_generator",
    "AugmentDraws",
    "BRIGHTNESS",
    "change_lighting",
    "CONTRAST",
    "draw_augmentation",
    "flip_and_crop",
    "LIGHTING_ORDERS",
    "PAD",
]

PAD = 4
BRIGHTNESS = (0.1, 0.9)
CONTRAST = (0.6, 1.4)
LIGHTING_ORDERS = ("fastai", "contrast_first")
_EPS = 1e-6  # keeps logit() finite at pure black and white

_CURRENT: contextvars.ContextVar[torch.Generator | None] = contextvars.ContextVar(
    "augmentation_generator", default=None
)


@contextlib.contextmanager
def augmentation_generator(generator: torch.Generator | None) -> Iterator[None]:
    """Within the block, `augment_images` calls without a generator draw from `generator`."""
    token = _CURRENT.set(generator)
    try:
        yield
    finally:
        _CURRENT.reset(token)


@dataclass(frozen=True)
class AugmentDraws:
    """One image's worth of random choices per row: flip, crop offsets, brightness, contrast."""

    flips: torch.Tensor  # (N,) bool
    tops: torch.Tensor  # (N,) int64 in 0..2 * pad
    lefts: torch.Tensor  # (N,) int64 in 0..2 * pad
    brightness: torch.Tensor  # (N,) float in BRIGHTNESS
    contrast: torch.Tensor  # (N,) float in CONTRAST (log-uniform)

    @staticmethod
    def identity(count: int, pad: int = PAD, device: torch.device | str = "cpu") -> AugmentDraws:
        """Draws that leave images unchanged (no flip, centre crop, c = 0.5, s = 1)."""
        offsets = torch.full((count,), pad, dtype=torch.long, device=device)
        return AugmentDraws(
            flips=torch.zeros(count, dtype=torch.bool, device=device),
            tops=offsets,
            lefts=offsets.clone(),
            brightness=torch.full((count,), 0.5, device=device),
            contrast=torch.ones(count, device=device),
        )

    def to(self, device: torch.device | str) -> AugmentDraws:
        return AugmentDraws(
            *(
                t.to(device, non_blocking=True)
                for t in (self.flips, self.tops, self.lefts, self.brightness, self.contrast)
            )
        )

    @staticmethod
    def cat(parts: Sequence[AugmentDraws]) -> AugmentDraws:
        return AugmentDraws(
            *(
                torch.cat([getattr(p, name) for p in parts])
                for name in ("flips", "tops", "lefts", "brightness", "contrast")
            )
        )


def draw_augmentation(
    count: int,
    device: torch.device | str = "cpu",
    generator: torch.Generator | None = None,
    pad: int = PAD,
) -> AugmentDraws:
    """Random choices for `count` images, in a fixed order (flips, tops, lefts, brightness,
    contrast); from `generator` on the CPU (then copied to `device`), else the global stream."""
    where = "cpu" if generator is not None else device
    flips = torch.rand(count, device=where, generator=generator) < 0.5
    tops = torch.randint(0, 2 * pad + 1, (count,), device=where, generator=generator)
    lefts = torch.randint(0, 2 * pad + 1, (count,), device=where, generator=generator)
    low, high = BRIGHTNESS
    brightness = low + (high - low) * torch.rand(count, device=where, generator=generator)
    low, high = math.log(CONTRAST[0]), math.log(CONTRAST[1])
    contrast = torch.exp(low + (high - low) * torch.rand(count, device=where, generator=generator))
    draws = AugmentDraws(flips, tops, lefts, brightness, contrast)
    return draws.to(device) if generator is not None else draws


def apply_flip_and_crop(images: torch.Tensor, draws: AugmentDraws, pad: int = PAD) -> torch.Tensor:
    """Flip the rows `draws.flips` left-right, reflection-pad by `pad`, crop back to size at
    (`draws.tops`, `draws.lefts`) (offset `pad` in both axes and no flip is the identity)."""
    count, channels, height, width = images.shape
    device = images.device
    images = torch.where(draws.flips.view(-1, 1, 1, 1), images.flip(-1), images)
    padded = F.pad(images, (pad, pad, pad, pad), mode="reflect")
    rows = (draws.tops.view(-1, 1) + torch.arange(height, device=device)).view(count, 1, -1, 1)
    cols = (draws.lefts.view(-1, 1) + torch.arange(width, device=device)).view(count, 1, 1, -1)
    batch = torch.arange(count, device=device).view(-1, 1, 1, 1)
    channel = torch.arange(channels, device=device).view(1, -1, 1, 1)
    return padded[batch, channel, rows, cols]


def flip_and_crop(images: torch.Tensor, pad: int = PAD) -> torch.Tensor:
    """Each image flipped left-right w.p. 0.5, reflection-padded by `pad`, cropped at a random
    offset back to its size (global random stream)."""
    draws = draw_augmentation(images.shape[0], images.device, pad=pad)
    return apply_flip_and_crop(images, draws, pad)


def change_lighting(
    pixels: torch.Tensor,
    brightness: torch.Tensor,
    contrast: torch.Tensor,
    order: str = "fastai",
) -> torch.Tensor:
    """[0, 1] pixels -> sigmoid(contrast * (logit(x) + logit(brightness))) (fastai's order), or
    sigmoid(contrast * logit(x) + logit(brightness)) (`order="contrast_first"`); one pair per
    image."""
    if order not in LIGHTING_ORDERS:
        raise ValueError(f"lighting order {order!r}: expected one of {LIGHTING_ORDERS}")
    logits = torch.logit(pixels.clamp(_EPS, 1 - _EPS))
    shift = torch.logit(brightness).view(-1, 1, 1, 1).to(logits.dtype)
    scale = contrast.view(-1, 1, 1, 1).to(logits.dtype)
    if order == "fastai":
        return torch.sigmoid(scale * (logits + shift))
    return torch.sigmoid(logits * scale + shift)


def apply_augmentation(
    images: torch.Tensor,
    draws: AugmentDraws,
    normalization: Normalization,
    lighting_order: str = "fastai",
) -> torch.Tensor:
    """A.4's augmentation of normalised NCHW images with the given per-image draws."""
    mean = torch.tensor(normalization.mean, device=images.device).view(1, 3, 1, 1)
    std = torch.tensor(normalization.std, device=images.device).view(1, 3, 1, 1)
    pixels = apply_flip_and_crop(images * std + mean, draws)
    lit = change_lighting(pixels, draws.brightness, draws.contrast, lighting_order)
    return (lit - mean) / std


def active_generator(generator: torch.Generator | None = None) -> torch.Generator | None:
    """`generator`, else the one of `augmentation_generator`, else None (the global stream)."""
    return generator if generator is not None else _CURRENT.get()


def augment_images(
    images: torch.Tensor,
    normalization: Normalization,
    generator: torch.Generator | None = None,
    lighting_order: str = "fastai",
) -> torch.Tensor:
    """A.4's augmentation of a batch of normalised NCHW images (fresh draws per image, from
    `generator`, else the one of `augmentation_generator`, else the global stream)."""
    generator = active_generator(generator)
    draws = draw_augmentation(images.shape[0], images.device, generator)
    return apply_augmentation(images, draws, normalization, lighting_order)
