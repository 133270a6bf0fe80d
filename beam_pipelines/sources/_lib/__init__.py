"""What the sources share: input files and archive members, folder entries, image-file
units, listed and fraction splits, published split lists, raw downloads, the typed config.
"""

__all__ = [
    "archive_members",
    "folder_entries",
    "fraction_split",
    "image_file_units",
    "input_files",
    "listed_split_source",
    "published_splits",
    "raw_downloads",
    "source_config",
]
