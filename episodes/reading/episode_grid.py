"""A PNG picture of one episode: a row per class for the support set, then for the query set.

Each row starts with the label (0..N-1), the absolute class id, the count and the class name,
followed by that class's images (at most `max_per_row`, then "+k more"); every thumbnail carries
its label in a corner, so the picture shows what a learner is given.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from episodes.util.atomic_files import atomic_path

__all__ = ["render_episode_grid", "save_episode_grid"]

_BACKGROUND = (255, 255, 255)
_INK = (20, 20, 20)
_SECTION = (40, 70, 160)
_PAD = 4
_TEXT_W = 260


def _as_uint8(images: np.ndarray) -> np.ndarray:
    if images.dtype == np.uint8:
        return images
    lo, hi = float(images.min(initial=0.0)), float(images.max(initial=1.0))
    scale = 255.0 / (hi - lo) if hi > lo else 1.0
    return np.clip((images - lo) * scale, 0, 255).astype(np.uint8)


def _shorten(text: str, width: int) -> str:
    """Keep both ends of a long label (class names differ most at their end)."""
    if len(text) <= width:
        return text
    head = width // 2 - 1
    return text[:head] + ".." + text[-(width - head - 2) :]


def _field(episode: Any, name: str) -> Any:
    return episode[name] if isinstance(episode, dict) else getattr(episode, name)


def render_episode_grid(
    episode: Any, max_per_row: int = 12, thumb: int | None = None
) -> Image.Image:
    """Picture of an episode (an `episodes.sampling.episode.Episode` or a dict with the same fields)."""
    names = list(_field(episode, "class_names"))
    ways = len(names)
    sections = []
    for title, prefix in (("support", "support"), ("query", "query")):
        images = _as_uint8(np.asarray(_field(episode, f"{prefix}_images")))
        labels = np.asarray(_field(episode, f"{prefix}_labels"))
        ids = np.asarray(_field(episode, f"{prefix}_class_ids"))
        sections.append((title, images, labels, ids))
    size = sections[0][1].shape[1] if len(sections[0][1]) else 84
    if thumb is None:
        thumb = size if ways <= 10 else max(32, min(size, 48))
    font = ImageFont.load_default()
    row_h = thumb + _PAD
    header_h = 22
    widest = max(
        (int(np.bincount(s[2], minlength=1).max()) for s in sections if len(s[2])), default=1
    )
    width = _TEXT_W + min(max_per_row, widest) * (thumb + _PAD) + 70
    height = header_h + sum(header_h + ways * row_h for _ in sections) + _PAD
    canvas = Image.new("RGB", (width, height), _BACKGROUND)
    draw = ImageDraw.Draw(canvas)
    source = _field(episode, "source")
    index = _field(episode, "episode_index")
    split = _field(episode, "split")
    draw.text((_PAD, 4), f"{source} / {split} / episode {index}: {ways} ways", fill=_INK, font=font)
    y = header_h
    for title, images, labels, ids in sections:
        draw.text((_PAD, y + 4), f"{title}: {len(labels)} images", fill=_SECTION, font=font)
        y += header_h
        for label in range(ways):
            rows = np.flatnonzero(labels == label)
            class_id = int(ids[rows[0]]) if len(rows) else -1
            text = f"{label:>2} [{class_id}] x{len(rows)} {names[label]}"
            draw.text((_PAD, y + thumb // 2 - 6), _shorten(text, 42), fill=_INK, font=font)
            x = _TEXT_W
            for row in rows[:max_per_row]:
                tile = Image.fromarray(images[row])
                if tile.size != (thumb, thumb):
                    tile = tile.resize((thumb, thumb), Image.Resampling.BILINEAR)
                canvas.paste(tile, (x, y))
                draw.rectangle((x, y, x + 13, y + 11), fill=_BACKGROUND)
                draw.text((x + 1, y), str(label), fill=_INK, font=font)
                x += thumb + _PAD
            if len(rows) > max_per_row:
                draw.text(
                    (x, y + thumb // 2 - 6),
                    f"+{len(rows) - max_per_row} more",
                    fill=_INK,
                    font=font,
                )
            y += row_h
    return canvas


def save_episode_grid(episode: Any, path: str | os.PathLike, **options: Any) -> Path:
    """Render and write the episode picture as PNG; returns the path."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise FileNotFoundError(f"{path.parent}: folder for the grid picture does not exist")
    picture = render_episode_grid(episode, **options)
    with atomic_path(path) as tmp:  # a full disk leaves no 0-byte or cut PNG
        picture.save(tmp, format="PNG")
    return path
