"""Object storage (s3://, gs://, and every Beam file system): paths, access checks, uploads,
reads of many objects in flight, and the records of a remote dataset.
"""

__all__ = ["access", "parallel_reads", "paths", "remote_records", "uploads"]
