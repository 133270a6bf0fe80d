"""`--method published`: a shipped split (`episodes.records.published_splits`), as a file
(`method`)."""

from __future__ import annotations

from episodes.util.lazy_names import lazy_names

__all__ = ["PublishedMethod", "PublishedParameters"]

__getattr__, __dir__ = lazy_names(
    __name__,
    dict.fromkeys(("PublishedMethod", "PublishedParameters"), "splits.methods.published.method"),
)
