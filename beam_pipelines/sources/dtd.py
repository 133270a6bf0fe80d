"""Describable Textures (DTD): `dtd/images/<category>/*.jpg`, 47 categories.

Classes are the category folders (e.g. `chequered`). Hidden files (the real archive has a stray
`waffled/.directory`) are listed as skipped, not converted.
"""

from __future__ import annotations

from beam_pipelines.sources._lib.listed_split_source import ClassFolderSource
from beam_pipelines.sources._lib.raw_downloads import TfdsRegistered

__all__ = ["DTDSource"]


class DTDSource(ClassFolderSource):
    name = "dtd"
    layout = "dtd/images/<category>/*.jpg"
    wrappers = ("dtd",)
    dataset_title = "Describable Textures"
    downloads = (TfdsRegistered("dtd", "dtd-r1.0.1.tar.gz", extract=True),)  # -> dtd/images/
