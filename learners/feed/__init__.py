"""Where learners get their data: episodes and batches as tensors, read ahead onto the device."""

__all__ = [
    "batched_episodes",
    "class_holdout",
    "device_prefetch",
    "episode_batch",
    "episode_feed",
    "episode_source",
    "sampler_options",
    "synthetic_episodes",
    "validation_dataset",
]
