"""Stored pixels follow the reference Meta-Dataset converter by default (every Meta-Dataset
source: RGB JPEG, source RGB JPEGs kept byte for byte, crops, Omniglot inverted, PIL's default
JPEG settings), and the raw files' own pixels with `--pixel-convention original`."""

from __future__ import annotations

import io
from collections import defaultdict

import numpy as np
import pytest
from PIL import Image, ImageOps

from beam_pipelines.conversion.image_codec import ImageOptions, ImageRejected, process_image
from beam_pipelines.sources import get_source_class
from beam_pipelines.sources._lib.source_config import ConfigError
from beam_pipelines.sources.emnist import EmnistSource
from beam_pipelines.sources.omniglot import OmniglotSource
from episodes.records.dataset_spec import load_spec
from episodes.records.record_reader import RecordReader
from tests.fixtures.meta_dataset_checks import convert_source
from tests.fixtures.raw.aircraft import write_aircraft_fixture
from tests.fixtures.raw.cu_birds import write_cu_birds_fixture
from tests.fixtures.raw.dtd import write_dtd_fixture
from tests.fixtures.raw.emnist import write_emnist_fixture
from tests.fixtures.raw.fungi import write_fungi_fixture
from tests.fixtures.raw.ilsvrc import write_ilsvrc_fixture
from tests.fixtures.raw.mscoco import write_mscoco_fixture
from tests.fixtures.raw.omniglot import write_omniglot_fixture
from tests.fixtures.raw.quickdraw import write_quickdraw_fixture
from tests.fixtures.raw.traffic_sign import write_traffic_sign_fixture
from tests.fixtures.raw.vgg_flower import write_vgg_flower_fixture


def reference_record(data: bytes | None, array=None, box=None, invert: bool = False) -> bytes:
    """What the reference converter stores for one raw image, by its rules: the file's bytes
    when it is an RGB JPEG needing no crop or inversion; else PIL `convert("RGB")`, crop,
    invert, `save(format="JPEG")` with PIL's defaults. Quick Draw rows: RGB, JPEG."""
    if array is not None:
        image, changed = Image.fromarray(array).convert("RGB"), True
    else:
        image = Image.open(io.BytesIO(data))
        changed = image.format != "JPEG"
        if image.mode != "RGB":
            image, changed = image.convert("RGB"), True
    if box is not None:  # MSCOCO's enlarged boxes are clipped to the image, as there
        left, top, right, bottom = box
        box = (max(left, 0), max(top, 0), min(right, image.width), min(bottom, image.height))
        image, changed = image.crop(box), True
    if invert:
        image, changed = ImageOps.invert(image), True
    if not changed:
        return data
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG")
    return buffer.getvalue()


def _few(name):
    from tests.fixtures.raw.fixture_info import published_classes

    return published_classes(name)[:4]


# source -> (fixture writer, options): a few classes each, drawn into a random split.
FIXTURES = {
    "aircraft": (lambda root: write_aircraft_fixture(root, classes=_few("aircraft")), {}),
    "cu_birds": (lambda root: write_cu_birds_fixture(root, classes=_few("cu_birds")), {}),
    "dtd": (lambda root: write_dtd_fixture(root, classes=_few("dtd")), {}),
    "fungi": (lambda root: write_fungi_fixture(root, classes=_few("fungi")), {}),
    "mscoco": (lambda root: write_mscoco_fixture(root, classes=_few("mscoco")), {}),
    "quickdraw": (lambda root: write_quickdraw_fixture(root, classes=_few("quickdraw")), {}),
    "traffic_sign": (
        lambda root: write_traffic_sign_fixture(root, classes=_few("traffic_sign")),
        {},
    ),
    "vgg_flower": (lambda root: write_vgg_flower_fixture(root, classes=_few("vgg_flower")), {}),
    "ilsvrc_2012": (
        lambda root: write_ilsvrc_fixture(root, images_per_class=1),
        {"ilsvrc_allow_missing_classes": True},
    ),
    "omniglot": (lambda root: write_omniglot_fixture(root, drawers=2), {}),
}


def _expected_by_class(source, plan, invert: bool) -> dict[str, list[bytes]]:
    """The reference's records of every raw item the source reads, by class name."""
    expected = defaultdict(list)
    for unit in plan.units:
        for item in source.read_unit(unit):
            if item.error:
                continue
            try:
                record = reference_record(item.data, item.array, item.crop_box, invert)
            except (OSError, ValueError):  # corrupt input or empty crop: both tools skip it
                continue
            expected[item.class_name].append(record)
    return expected


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_default_records_are_the_reference_converters(tmp_path, name):
    write, options = FIXTURES[name]
    fixture = write(tmp_path / "raw")
    if name not in ("ilsvrc_2012", "omniglot"):  # the others: a published split of a subset
        options = dict(options, random_split=True)
    source = get_source_class(name)(**options)
    plan = source.plan(fixture.root)
    invert = name == "omniglot"
    expected = _expected_by_class(source, plan, invert)
    report = convert_source(type(source), fixture.root, tmp_path / "out", **options)
    spec = report.spec
    assert spec.image_format == "jpeg"
    assert spec.provenance["pixel_convention"] == "meta-dataset"
    assert spec.provenance["inverted"] is invert
    reader = RecordReader(tmp_path / "out")
    compared = 0
    for class_id, class_name in enumerate(spec.class_names):
        stored = [reader.read_example(class_id, k)[0] for k in range(reader.num_records(class_id))]
        assert sorted(stored) == sorted(expected[class_name]), class_name
        compared += len(stored)
    assert compared == spec.total_images > 0


def test_source_jpegs_are_kept_byte_for_byte(tmp_path):
    """An RGB JPEG needing no change is stored as the file's own bytes (not re-encoded)."""
    fixture = write_dtd_fixture(tmp_path / "raw", classes=_few("dtd"))
    report = convert_source(
        get_source_class("dtd"), fixture.root, tmp_path / "out", random_split=True
    )
    raw_files = {p.read_bytes() for p in fixture.root.rglob("*.jpg")}
    reader = RecordReader(tmp_path / "out")
    stored = {
        reader.read_example(c, k)[0]
        for c in range(report.spec.num_classes)
        for k in range(reader.num_records(c))
    }
    assert stored and stored <= raw_files


def test_omniglot_polarity_default_and_original(tmp_path):
    """Reference: white strokes on black, RGB; original: the PNGs' black strokes on white."""
    fixture = write_omniglot_fixture(tmp_path / "raw", drawers=1)
    convert_source(OmniglotSource, fixture.root, tmp_path / "reference")
    convert_source(OmniglotSource, fixture.root, tmp_path / "original", pixel_convention="original")
    reference, original = RecordReader(tmp_path / "reference"), RecordReader(tmp_path / "original")
    spec = load_spec(tmp_path / "original")
    assert spec.image_format == "png" and spec.provenance["pixel_convention"] == "original"
    assert spec.provenance["inverted"] is False
    source_png = next(fixture.root.glob("images_background/Alpha/character01/0001_01.png"))
    raw = np.asarray(Image.open(source_png).convert("L"))
    kept = Image.open(io.BytesIO(original.read_example(0, 0)[0]))
    assert kept.mode == "L" and np.array_equal(np.asarray(kept), raw)
    inverted = Image.open(io.BytesIO(reference.read_example(0, 0)[0]))
    assert inverted.mode == "RGB" and inverted.format == "JPEG"
    pixels = np.asarray(inverted.convert("L")).astype(int)
    # Background (white in the PNG) is black; strokes are white, up to JPEG ringing.
    assert np.abs(pixels - (255 - raw.astype(int))).mean() < 6
    assert (pixels[raw == 255] < 64).mean() > 0.97 and (pixels[raw == 0] > 128).mean() > 0.8


def test_sources_outside_meta_dataset_keep_their_own_format(tmp_path):
    """EMNIST has no reference conversion: original pixels whatever the option says."""
    fixture = write_emnist_fixture(tmp_path / "raw")
    for convention in (None, "meta-dataset"):
        image_options = EmnistSource(pixel_convention=convention).image_options()
        assert image_options.convention == "original" and image_options.image_format == "png"
    assert fixture.root.exists()


def test_explicit_image_flags_override_the_convention():
    image_options = OmniglotSource(image_format="png").image_options()
    assert image_options.image_format == "png" and image_options.mode == "RGB"
    assert image_options.invert and image_options.convention == "meta-dataset"
    glyph = Image.new("L", (8, 8), 255)
    glyph.putpixel((3, 3), 0)
    buffer = io.BytesIO()
    glyph.save(buffer, format="PNG")
    stored = Image.open(io.BytesIO(process_image(buffer.getvalue(), image_options)))
    assert stored.format == "PNG" and stored.getpixel((3, 3)) == (255, 255, 255)
    assert stored.getpixel((0, 0)) == (0, 0, 0)
    with pytest.raises(ValueError, match="pixel convention 'mystery'"):
        ImageOptions(convention="mystery")
    with pytest.raises(ConfigError, match="--pixel-convention mystery: expected one of"):
        OmniglotSource(pixel_convention="mystery")


def test_a_truncated_source_jpeg_is_rejected_and_trailing_bytes_kept():
    """Kept JPEGs are checked without a full decode: one cut anywhere after its header has no
    end-of-image marker and is rejected; bytes after the marker are the file's own."""
    options = get_source_class("dtd")().image_options()
    rng = np.random.default_rng(1)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (64, 96, 3), dtype=np.uint8)).save(buffer, "JPEG")
    data = buffer.getvalue()
    assert process_image(data, options) == data
    assert process_image(data + b"trailer", options) == data + b"trailer"
    for cut in (len(data) - 1, len(data) // 2, 700):
        with pytest.raises(ImageRejected, match="truncated JPEG"):
            process_image(data[:cut], options)


def test_jpeg_marker_walk_agrees_with_pil():
    """The fast header read of kept JPEGs gives PIL's size, mode and scan start, or declines
    (then PIL's path decides): baseline, progressive, EXIF, optimised, 4:4:4, grey, CMYK."""
    from beam_pipelines.conversion.image_codec import open_image
    from beam_pipelines.conversion.jpeg_markers import jpeg_header

    rng = np.random.default_rng(2)
    pixels = Image.fromarray(rng.integers(0, 256, (37, 53, 3), dtype=np.uint8))
    variants = [{}, {"progressive": True}, {"exif": Image.Exif().tobytes()}, {"subsampling": 0}]
    checked = 0
    for mode in ("RGB", "L", "CMYK"):
        for options in variants + [{"quality": 50, "optimize": True}]:
            buffer = io.BytesIO()
            pixels.convert(mode).save(buffer, "JPEG", **options)
            data = buffer.getvalue()
            header, image = jpeg_header(data), open_image(data)
            assert header is not None
            assert (header.width, header.height) == image.size
            assert (header.components == 3) == (image.mode == "RGB")
            assert header.scan_start == image.fp.tell()
            checked += 1
    buffer = io.BytesIO()
    pixels.save(buffer, "PNG")
    assert jpeg_header(buffer.getvalue()) is None and jpeg_header(b"\xff\xd8\xff") is None
    assert checked == 15
