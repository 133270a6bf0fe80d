"""Beam's one line of import noise, dropped for this package's commands.

Beam's GCP I/O logs "apitools not found ..." on the root logger when it is imported without the
Google API clients (the `gcs` extra); local runs never use them, so for a `python -m
beam_pipelines.<command>` the line is noise. The filter goes on the root logger because that is
where Beam logs the line; `beam_pipelines/__init__` adds it only while such a command starts,
so importing the package as a library changes no logging state.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["GcpClientWarningFilter", "quiet_beam_import_noise", "starting_a_command"]


class GcpClientWarningFilter(logging.Filter):
    """Drops Beam's "apitools not found" import warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "apitools not found" not in record.getMessage()


def quiet_beam_import_noise() -> None:
    """Add the filter to the root logger (once)."""
    root = logging.getLogger()
    if not any(isinstance(f, GcpClientWarningFilter) for f in root.filters):
        root.addFilter(GcpClientWarningFilter())


def starting_a_command() -> bool:
    """True while `python -m` locates the module it will run: Python sets sys.argv[0] to "-m"
    until the module is found, and the package is imported on the way."""
    return sys.argv[:1] == ["-m"]
