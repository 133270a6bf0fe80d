"""The converted-dataset format: TFRecord framing, Example protos, record index and reader, dataset specs, object storage."""

# Our spec type (dataset_spec) reads and writes Meta-Dataset's spec JSON through this module,
# which builds on it and installs itself there when imported.
from episodes.records import meta_dataset_spec  # noqa: F401
