"""Traffic Signs (GTSRB final training set): `GTSRB/Final_Training/Images/000NN/*.ppm`, each
class folder with its semicolon-separated annotation file `GT-000NN.csv`.

Classes are named `NN.<sign name>` with names from the reference `TrafficSign_labels.txt`
(e.g. `00.Speed limit (20km/h)`). Full images are converted (not cropped to the CSV's ROI) and
the CSV itself is skipped, as the reference converter does; its `ClassId` column is checked
against the folder. All 43 classes are test classes (Meta-Dataset section 3.1).
"""

from __future__ import annotations

import csv
from functools import cached_property
from pathlib import Path

from beam_pipelines.sources._lib.listed_split_source import ClassFolderSource
from beam_pipelines.sources._lib.published_splits import read_label_list
from beam_pipelines.sources._lib.raw_downloads import Published
from beam_pipelines.sources.base import LayoutError

__all__ = ["TrafficSignSource"]


class TrafficSignSource(ClassFolderSource):
    name = "traffic_sign"
    raw_folders = ("GTSRB", "traffic_sign")
    layout = "GTSRB/Final_Training/Images/000NN/*.ppm with GT-000NN.csv"
    images_dir = "Final_Training/Images"
    wrappers = ("GTSRB",)
    dataset_title = "GTSRB"
    split_fractions = (0.0, 0.0, 1.0)
    default_image_format = "jpeg"
    # Not registered by TFDS. The URL is the benchmark's archive (linked from
    # https://benchmark.ini.rub.de/gtsrb_dataset.html); the MD5 is the one torchvision-style
    # dataset loaders pin for it (e.g. the GTSRB resources lists of several public loaders);
    # no SHA-256 or size is published. The zip holds GTSRB/Final_Training/Images/.
    downloads = (
        Published(
            url="https://sid.erda.dk/public/archives/daaeac0d7ce1152aea9b61d9f1e19370/"
            "GTSRB_Final_Training_Images.zip",
            file_name="GTSRB_Final_Training_Images.zip",
            origin="MD5 pinned by public GTSRB loaders; no SHA-256 published",
            md5="f33fd80ac59bff73c82d25ab499e03a3",
            extract=True,
        ),
    )

    @cached_property
    def labels(self) -> list[str]:
        return read_label_list("TrafficSign_labels.txt")

    def class_name_of(self, folder: Path) -> str | None:
        if not (folder.name.isdigit() and len(folder.name) == 5):
            return None
        class_id = int(folder.name)
        if class_id >= len(self.labels):
            raise LayoutError(
                f"{folder}: class folder {class_id} but TrafficSign_labels.txt names only "
                f"{len(self.labels)} classes (00000..{len(self.labels) - 1:05d})"
            )
        self._check_annotations(folder, class_id)
        return f"{class_id:02d}.{self.labels[class_id]}"

    def files_to_skip(self, folder: Path) -> tuple[str, ...]:
        return (f"GT-{folder.name}.csv",)

    @staticmethod
    def _check_annotations(folder: Path, class_id: int) -> None:
        path = folder / f"GT-{folder.name}.csv"
        if not path.is_file():
            return
        with path.open(newline="", encoding="utf-8") as handle:
            rows = csv.DictReader(handle, delimiter=";")
            if rows.fieldnames is None or "ClassId" not in rows.fieldnames:
                raise LayoutError(
                    f"{path}: expected a semicolon CSV with a ClassId column, "
                    f"found columns {rows.fieldnames}"
                )
            for row in rows:
                if row["ClassId"].strip() != str(class_id):
                    raise LayoutError(
                        f"{path}: {row.get('Filename')} has ClassId {row['ClassId']} "
                        f"inside class folder {folder.name}"
                    )
