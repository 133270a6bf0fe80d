"""Fetching raw data: the registry of each source's files and the HTTP fetch with resume and
checksums (the command is `python -m beam_pipelines.download`).
"""

__all__ = ["http_fetch", "registry"]
