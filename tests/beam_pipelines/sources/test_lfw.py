"""The LFW converter: LFW10 selection, scikit-learn class order and crop, archives, layouts."""

from __future__ import annotations

import io
import shutil

import numpy as np
import pytest
from PIL import Image

from beam_pipelines.conversion.pipeline import convert
from beam_pipelines.sources.base import LayoutError
from beam_pipelines.sources.lfw import LfwSource
from beam_pipelines.verify import format_report, verify_dataset
from episodes.records.dataset_spec import load_spec
from episodes.records.record_reader import RecordReader
from tests.fixtures.meta_dataset_checks import digest
from tests.fixtures.raw.lfw import write_lfw_fixture
from tests.fixtures.source_test_case import SourceTestCase


def _source(**options) -> LfwSource:
    return LfwSource(**options)


class TestLfw(SourceTestCase):
    SOURCE = LfwSource
    FIXTURE = write_lfw_fixture
    OPTIONS = {"lfw_images_per_unit": 15}
    DATASET = "lfw10"
    NUM_CLASSES = 4
    # the corrupt file counts toward the 10-image threshold, then is rejected
    IMAGES_PER_CLASS = staticmethod(lambda f: [f.people[n] - (n in f.corrupt) for n in f.kept(10)])
    REJECTED = 1
    IMAGE_FORMAT = "jpeg"
    SPEC_KEYS = ("people_found", "variant", "read_from")
    RERUN_WORKERS = 2

    def test_lfw10_people_order_counts_and_corrupt_file(self, fixture, converted):
        _, out, report = converted
        spec = load_spec(out)
        assert spec.name == "lfw10" and spec.image_format == "jpeg"
        # scikit-learn's order reads '_' as ' ': "Jo Ann Lee" < "JoAnne Smith" (folders: reversed).
        assert (
            spec.class_names
            == fixture.kept(10)
            == ["Ada_Lovelace", "Jo_Ann_Lee", "JoAnne_Smith", "Zhang_Wei"]
        )
        assert not spec.has_splits
        # The corrupt file counts toward the threshold (as in scikit-learn) and is then rejected.
        expected = [fixture.people[n] - (n in fixture.corrupt) for n in spec.class_names]
        assert spec.images_per_class == expected
        rejected = spec.provenance["rejected"]
        assert len(rejected) == 1 and rejected[0]["path"].endswith(f"lfw.tgz:{fixture.corrupt}")
        assert "not a decodable image" in rejected[0]["reason"]
        assert spec.provenance["people_found"] == len(fixture.people)
        assert spec.provenance["variant"] == "lfw" and report.images == sum(expected)
        reader = RecordReader(out)
        for class_id in range(spec.num_classes):
            image, label = reader.read_example(class_id, 0)
            assert label == class_id and Image.open(io.BytesIO(image)).size == (250, 250)
        verified = verify_dataset(out, progress=False)
        assert verified.ok, format_report(verified)

    def test_extracted_folder_gives_identical_files(self, fixture, converted, tmp_path):
        from tests.fixtures.local_runner import make_local_runner

        _, out, _ = converted
        folder = write_lfw_fixture(tmp_path / "extracted", variant="funneled", extracted=True)
        from_folder = convert(_source(), folder.path, tmp_path / "b", make_local_runner(1))
        assert digest(from_folder.output, spec=False) == digest(out, spec=False)
        assert from_folder.spec.provenance["read_from"] == "folder:lfw_funneled"

    def test_min_images_selects_people(self, fixture):
        plan = _source(lfw_min_images=1).plan(fixture.path)
        assert [c.name for c in plan.classes] == fixture.kept(1) and len(plan.classes) == 8
        assert plan.dataset_name == "lfw"
        assert [c.name for c in _source(lfw_min_images=11).plan(fixture.root).classes] == [
            "Ada_Lovelace",
            "Jo_Ann_Lee",
        ]
        with pytest.raises(
            LayoutError, match="no person has 13 images .at most 12.; lower --lfw-min-images"
        ):
            _source(lfw_min_images=13).plan(fixture.root)

    def test_wrong_layouts_fail_before_the_pipeline(self, fixture, tmp_path):
        with pytest.raises(LayoutError, match="not found"):
            _source().plan(tmp_path / "nope")
        other = tmp_path / "other"
        (other / "images").mkdir(parents=True)
        with pytest.raises(LayoutError, match=r"no LFW archive or folder \(found \['images'\]\)"):
            _source().plan(other)
        both = tmp_path / "both"
        both.mkdir()
        shutil.copy(fixture.path, both / "lfw.tgz")
        (both / "lfw_funneled" / "Ada_Lovelace").mkdir(parents=True)
        with pytest.raises(
            LayoutError, match="several LFW variants found .funneled, lfw.; choose one"
        ):
            _source().plan(both)
        assert _source(lfw_variant="lfw").plan(both).provenance["read_from"] == "tar:lfw.tgz"
        cut = tmp_path / "cut"
        cut.mkdir()
        (cut / "lfw.tgz").write_bytes(fixture.path.read_bytes()[:200_000])
        with pytest.raises(LayoutError, match="lfw.tgz: not a readable tar archive after lfw/"):
            _source().plan(cut)
        wrong = tmp_path / "wrong"
        wrong.mkdir()
        shutil.copy(fixture.path, wrong / "lfw-funneled.tgz")  # root lfw/, not lfw_funneled/
        with pytest.raises(
            LayoutError,
            match=r"no lfw_funneled/<Person_Name>/<file>.jpg members "
            r"\(found top-level \['lfw'\]\)",
        ):
            _source().plan(wrong)


@pytest.mark.parametrize("color", [False, True])
def test_sklearn_crop_matches_scikit_learn(tmp_path, local_runner, color):
    from sklearn.datasets._lfw import _load_imgs  # the loader fetch_lfw_people uses

    raw = write_lfw_fixture(tmp_path / "raw", variant="funneled", extracted=True)
    options = dict(lfw_sklearn_crop=True, lfw_color=color, lfw_min_images=11)
    report = convert(_source(**options), raw.root, tmp_path / "out", local_runner(1))
    spec = report.spec
    assert spec.image_format == "png" and spec.class_names == ["Ada_Lovelace", "Jo_Ann_Lee"]
    assert len(spec.provenance["rejected"]) == 1
    reader = RecordReader(report.output)
    for class_id, person in enumerate(spec.class_names):
        files = sorted((raw.path / person).iterdir())
        files = [str(f) for f in files if not str(f).endswith(raw.corrupt.split("/", 1)[1])]
        faces = _load_imgs(files, (slice(70, 195), slice(78, 172)), color, 0.5)
        assert reader.num_records(class_id) == len(files)
        for k, face in enumerate(faces):
            image, label = reader.read_example(class_id, k)
            stored = np.asarray(Image.open(io.BytesIO(image)), dtype=np.float32) / 255.0
            assert label == class_id and stored.shape == face.shape == (
                (62, 47, 3) if color else (62, 47)
            )
            assert np.abs(stored - face).max() <= 0.5 / 255 + 1e-6
