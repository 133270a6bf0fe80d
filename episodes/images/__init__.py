"""From encoded record to pixels: decoding, the reference resize, the image size limit, the decoded cache."""

# The modules are the API (each declares its own names).
__all__ = [
    "decoded_cache",
    "gpu_decode",
    "image_decode",
    "image_size_limit",
    "record_images",
    "reference_resize",
]
