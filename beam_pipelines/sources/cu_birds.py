"""CUB-200-2011: `CUB_200_2011/images/<NNN.Name>/*.jpg`.

Classes are the 200 species folders, named as the folders are (e.g. `190.Red_cockaded_Woodpecker`).
Full images are used, not cropped to the provided boxes (Meta-Dataset appendix, "CUB-200-2011").
"""

from __future__ import annotations

from beam_pipelines.sources._lib.listed_split_source import ClassFolderSource
from beam_pipelines.sources._lib.raw_downloads import TfdsRegistered

__all__ = ["CUBirdsSource"]


class CUBirdsSource(ClassFolderSource):
    name = "cu_birds"
    raw_folders = ("CUB_200_2011", "cu_birds")
    layout = "CUB_200_2011/images/<NNN.Species_name>/*.jpg"
    wrappers = ("CUB_200_2011",)
    dataset_title = "CUB-200-2011"
    # TFDS's caltech_birds2011 (its first registered URL for the file: data.caltech.edu).
    downloads = (TfdsRegistered("caltech_birds2011", "CUB_200_2011.tgz", extract=True),)
