"""The stored formats: TFRecord framing, Example protos, record index and reader, dataset specs,
object storage; split files, the split fractions rule and the shipped published splits."""

# The modules are the API (each declares its own names).
__all__ = [
    "dataset_spec",
    "example_proto",
    "index_conventions",
    "local_dataset",
    "meta_dataset_spec",
    "object_uploads",
    "published_splits",
    "reader_errors",
    "record_index",
    "record_reader",
    "remote_records",
    "split_file",
    "split_sizes",
    "storage_access",
    "storage_paths",
    "tfrecord_io",
]


# Our spec type (dataset_spec) reads and writes Meta-Dataset's spec JSON through this module,
# which builds on it and installs itself there when imported.
from episodes.records import meta_dataset_spec  # noqa: F401
