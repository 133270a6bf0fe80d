"""The reader's error type, shared by the reader and its decoding workers."""

from __future__ import annotations

__all__ = ["ReaderError"]


class ReaderError(ValueError):
    """Reader options or inputs that cannot produce episodes."""
