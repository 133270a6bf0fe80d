"""Where learners get their data: episodes and batches as tensors, read ahead onto the device."""
