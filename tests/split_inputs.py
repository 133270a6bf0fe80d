"""The inputs the split tests share: a converted-dataset spec, a name list and class embeddings
of the same 30 classes (three clusters, so ATG has divergences to reach)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from episodes.records.dataset_spec import DatasetSpec
from splits.embeddings.embeddings_file import EmbeddingsFile

NAMES = [f"k{i:02d}" for i in range(30)]


def write_split_inputs(root: Path) -> dict[str, Path]:
    """`toyset/` (its dataset_spec.json), `names.txt` and `emb.npz` under `root`."""
    folder = root / "toyset"
    folder.mkdir(parents=True)
    DatasetSpec(name="toyset", class_names=NAMES, images_per_class=[5] * 30).save(folder)
    names = root / "names.txt"
    names.write_text("\n".join(NAMES) + "\n")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 8))[np.arange(30) % 3] + 0.5 * rng.normal(size=(30, 8))
    emb = root / "emb.npz"
    EmbeddingsFile(NAMES, x.astype(np.float32), model="toy", weights_hash="w0").save(emb)
    return {"dataset": folder, "names": names, "embeddings": emb}
