"""Episode dicts (numpy, NHWC, uint8 or [0,1] floats) to normalised NCHW torch tensors.

The episode contract (a dict or an object with these attributes): `support_images` (S,H,W,3),
`support_labels` (S,) in 0..N-1, `support_class_ids` (S,), `query_images` (Q,H,W,3),
`query_labels` (Q,), `query_class_ids` (Q,), `source` (str).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from episodes.sampling.episode import ARRAY_FIELDS

__all__ = [
    "episode_field",
    "episode_to_tensors",
    "EpisodeTensors",
    "images_to_tensor",
    "Normalization",
]


@dataclass(frozen=True)
class Normalization:
    """Per-channel mean and standard deviation subtracted/divided after scaling to [0, 1]."""

    mean: tuple[float, float, float] = (0.485, 0.456, 0.406)  # ImageNet (Dhillon et al., A.4)
    std: tuple[float, float, float] = (0.229, 0.224, 0.225)


@dataclass
class EpisodeTensors:
    """One episode on a device: images NCHW float (normalised), labels int64 in 0..ways-1."""

    support_images: torch.Tensor
    support_labels: torch.Tensor
    query_images: torch.Tensor
    query_labels: torch.Tensor
    ways: int
    support_class_ids: np.ndarray
    query_class_ids: np.ndarray
    source: str

    @property
    def shots(self) -> np.ndarray:
        """Support examples per way (Meta-Dataset episodes are imbalanced)."""
        return np.bincount(self.support_labels.cpu().numpy(), minlength=self.ways)


def episode_field(episode: Any, name: str) -> Any:
    """Read a field from a dict-like or attribute-style episode; clear error when missing."""
    if isinstance(episode, Mapping):
        if name not in episode:
            raise KeyError(f"episode has no field {name!r}; expected fields {ARRAY_FIELDS}")
        return episode[name]
    if not hasattr(episode, name):
        raise KeyError(f"episode has no field {name!r}; expected fields {ARRAY_FIELDS}")
    return getattr(episode, name)


def images_to_tensor(
    images: np.ndarray | torch.Tensor,
    device: torch.device | str,
    normalization: Normalization = Normalization(),
    image_size: int | None = None,
    memory_format: torch.memory_format = torch.contiguous_format,
) -> torch.Tensor:
    """(B,H,W,3) uint8 or float in [0,1] -> (B,3,H',W') float32 normalised on `device`, laid
    out in `memory_format`. Pinned host tensors (the training feed's, on CUDA) are copied
    without blocking the host."""
    array = images if isinstance(images, torch.Tensor) else torch.from_numpy(np.asarray(images))
    if array.ndim != 4 or array.shape[-1] != 3:
        raise ValueError(f"images must have shape (B,H,W,3), got {tuple(array.shape)}")
    tensor = array.to(device, non_blocking=True)
    tensor = tensor.float() / 255.0 if tensor.dtype == torch.uint8 else tensor.float()
    tensor = tensor.permute(0, 3, 1, 2).contiguous(memory_format=memory_format)
    if image_size is not None and tuple(tensor.shape[-2:]) != (image_size, image_size):
        tensor = F.interpolate(
            tensor, size=(image_size, image_size), mode="bilinear", align_corners=False
        )
    mean = torch.tensor(normalization.mean, device=tensor.device).view(1, 3, 1, 1)
    std = torch.tensor(normalization.std, device=tensor.device).view(1, 3, 1, 1)
    return ((tensor - mean) / std).contiguous(memory_format=memory_format)


def _labels(values: Any, name: str) -> np.ndarray:
    labels = np.asarray(values)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{name} must be a 1-D integer array, got {labels.dtype} {labels.shape}")
    return labels.astype(np.int64)


def episode_to_tensors(
    episode: Any,
    device: torch.device | str = "cpu",
    normalization: Normalization = Normalization(),
    image_size: int | None = None,
    memory_format: torch.memory_format = torch.contiguous_format,
) -> EpisodeTensors:
    """Convert one episode to tensors on `device`, checking labels are 0..N-1 with N ways.

    Every way must have at least one support example; query labels must lie in 0..N-1.
    """
    if isinstance(episode, EpisodeTensors):
        return episode
    support_labels = _labels(episode_field(episode, "support_labels"), "support_labels")
    query_labels = _labels(episode_field(episode, "query_labels"), "query_labels")
    if support_labels.size == 0:
        raise ValueError("episode has an empty support set")
    ways = int(support_labels.max()) + 1
    missing = sorted(set(range(ways)) - set(support_labels.tolist()))
    if support_labels.min() < 0 or missing:
        raise ValueError(
            f"support_labels must cover 0..{ways - 1} with no gaps; missing ways {missing}"
        )
    if query_labels.size and (query_labels.min() < 0 or query_labels.max() >= ways):
        raise ValueError(f"query_labels must lie in 0..{ways - 1}, got {query_labels.tolist()}")
    support_images = episode_field(episode, "support_images")
    query_images = episode_field(episode, "query_images")
    if len(support_images) != len(support_labels) or len(query_images) != len(query_labels):
        raise ValueError(
            f"images and labels differ in length: support {len(support_images)} vs "
            f"{len(support_labels)}, query {len(query_images)} vs {len(query_labels)}"
        )
    source = (
        episode.get("source", "")
        if isinstance(episode, Mapping)
        else getattr(episode, "source", "")
    )
    return EpisodeTensors(
        support_images=images_to_tensor(
            support_images, device, normalization, image_size, memory_format
        ),
        support_labels=torch.from_numpy(support_labels).to(device),
        query_images=images_to_tensor(
            query_images, device, normalization, image_size, memory_format
        ),
        query_labels=torch.from_numpy(query_labels).to(device),
        ways=ways,
        support_class_ids=np.asarray(episode_field(episode, "support_class_ids")),
        query_class_ids=np.asarray(episode_field(episode, "query_class_ids")),
        source=str(source),
    )
