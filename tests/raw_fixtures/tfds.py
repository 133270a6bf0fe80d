"""A tiny TFDS dataset prepared on disk without network: three classes of random 8x8 RGB
images (`circle`, `square`, `triangle`), splits train (13) and test (5), TFRecord or ArrayRecord
shards. Needs tensorflow_datasets (the test imports it with `pytest.importorskip` first)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensorflow_datasets as tfds

NAME = "fewshot_test_shapes"
LABELS = ["circle", "square", "triangle"]
SPLIT_SIZES = {"train": 13, "test": 5}


def example(split: str, index: int) -> tuple[np.ndarray, int]:
    """The image and label of example `index` of `split` (a function of both alone)."""
    rng = np.random.default_rng([len(split), index])
    return rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8), (index * 7 + len(split)) % 3


class FewshotTestShapes(tfds.core.GeneratorBasedBuilder):
    """Three classes of random 8x8 images, generated in memory."""

    VERSION = tfds.core.Version("1.0.0")
    # Defined outside a package of datasets: no checksums file to look up next to the code
    # (tfds would otherwise need the `importlib_resources` backport to locate it).
    code_path = None

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict(
                {
                    "image": tfds.features.Image(shape=(8, 8, 3)),
                    "label": tfds.features.ClassLabel(names=LABELS),
                    "id": tfds.features.Text(),
                }
            ),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager):
        return {split: self._generate_examples(split) for split in SPLIT_SIZES}

    def _generate_examples(self, split):
        for index in range(SPLIT_SIZES[split]):
            image, label = example(split, index)
            yield f"{split}-{index}", {"image": image, "label": label, "id": f"{split}-{index}"}


def expected_images(splits=tuple(SPLIT_SIZES)) -> dict[int, list[bytes]]:
    """Raw pixels per label of the chosen splits, sorted."""
    per_class = defaultdict(list)
    for split in splits:
        for index in range(SPLIT_SIZES[split]):
            image, label = example(split, index)
            per_class[label].append(image.tobytes())
    return {label: sorted(images) for label, images in per_class.items()}


@dataclass
class TfdsFixture:
    root: Path  # the TFDS data dir holding fewshot_test_shapes/1.0.0/

    @property
    def images_per_class(self) -> dict[str, int]:
        return {LABELS[label]: len(images) for label, images in expected_images().items()}


def write_tfds_fixture(root: Path, file_format: str = "tfrecord") -> TfdsFixture:
    builder = FewshotTestShapes(data_dir=str(root), file_format=file_format)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(try_download_gcs=False)
    )
    return TfdsFixture(Path(root))
