"""Apache Beam jobs: dataset conversion, verification, embeddings, episode shards."""

import logging as _logging


class _DropGcpClientWarning(_logging.Filter):
    """Beam's GCP I/O warns at import when Google API clients are absent; local runs never
    use them, so the line is noise for every command of this package."""

    def filter(self, record: _logging.LogRecord) -> bool:
        return "apitools not found" not in record.getMessage()


_logging.getLogger().addFilter(_DropGcpClientWarning())
