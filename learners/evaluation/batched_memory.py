"""How many episodes to evaluate together by default (`learners.evaluate --episodes-per-batch`).

On CUDA: as many as half the free memory holds by an estimate of one episode's footprint
(one copy of the parameters with its gradient and two Adam states, plus the activations of a
nominal 100-image episode kept for the backward pass, measured by one probe forward pass); at
most 64. On CPU a fixed 8, where batching pays by fewer, larger kernels, not memory. Larger
episodes than the estimate assumes are safe: the evaluation loop halves a batch that runs out
of memory (results do not depend on the batch size).
"""

from __future__ import annotations

import torch
from torch import nn

from learners.methods.learner import Learner

__all__ = [
    "activation_bytes_per_image",
    "CPU_EPISODES_PER_BATCH",
    "default_episodes_per_batch",
    "episodes_per_batch_for_memory",
    "estimated_episode_bytes",
    "MAX_EPISODES_PER_BATCH",
    "NOMINAL_EPISODE_IMAGES",
]

CPU_EPISODES_PER_BATCH = 8
MAX_EPISODES_PER_BATCH = 64
NOMINAL_EPISODE_IMAGES = 100


def episodes_per_batch_for_memory(
    free_bytes: int, episode_bytes: int, fraction: float = 0.5, most: int = MAX_EPISODES_PER_BATCH
) -> int:
    """Episodes of `episode_bytes` each fitting in `fraction` of `free_bytes` (1..`most`)."""
    if episode_bytes <= 0:
        raise ValueError(f"episode footprint must be > 0 bytes, got {episode_bytes}")
    return max(1, min(most, int(free_bytes * fraction) // episode_bytes))


def activation_bytes_per_image(network: nn.Module, image_size: int, device: torch.device) -> int:
    """Bytes of every leaf module's float32 output for one image (a probe forward pass)."""
    total = 0

    def count(_module: nn.Module, _inputs: object, output: object) -> None:
        nonlocal total
        if isinstance(output, torch.Tensor):
            total += output[:1].numel() * 4

    leaves = [m for m in network.modules() if not list(m.children())]
    handles = [m.register_forward_hook(count) for m in leaves]
    was_training = network.training
    try:
        network.eval()
        with torch.no_grad():
            network(torch.zeros(1, 3, image_size, image_size, device=device))
    finally:
        network.train(was_training)
        for handle in handles:
            handle.remove()
    return total


def estimated_episode_bytes(learner: Learner) -> int:
    """One episode's footprint in batched fine-tuning (see the module docstring)."""
    parameters = sum(p.numel() * 4 for p in learner.parameters())
    per_image = activation_bytes_per_image(
        learner.backbone, learner.config.image_size, learner.device
    )
    return 4 * parameters + 2 * NOMINAL_EPISODE_IMAGES * per_image


def default_episodes_per_batch(learner: Learner) -> int:
    """The default of --episodes-per-batch on the learner's device."""
    device = learner.device
    if device.type != "cuda":
        return CPU_EPISODES_PER_BATCH
    free, _ = torch.cuda.mem_get_info(device)
    return episodes_per_batch_for_memory(free, estimated_episode_bytes(learner))
