"""The reader's error type, shared by the reader and its decoding workers."""

from __future__ import annotations

from episodes.util.cli_errors import UserError

__all__ = ["ReaderError"]


class ReaderError(UserError, ValueError):
    """Reader options or inputs that cannot produce episodes."""
