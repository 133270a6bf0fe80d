"""The conversion's fast paths give the bytes (and the rejections) of the plain PIL path they
skip: plain PNGs decoded without Image.open (beam_pipelines.conversion.codec_fast_paths), JPEGs
encoded without Image.save, local files read with descriptor calls, records framed from fixed
pieces."""

from __future__ import annotations

import io
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from beam_pipelines.conversion import codec_fast_paths
from beam_pipelines.conversion.codec_fast_paths import decode_plain_png, encode_jpeg
from beam_pipelines.conversion.image_codec import ImageOptions, ImageRejected, process_image
from beam_pipelines.conversion.jpeg_markers import (
    MULTI_PICTURE,
    SOF_MARKERS,
    STANDALONE,
    START_OF_SCAN,
    JpegHeader,
    jpeg_header,
)
from beam_pipelines.sources._lib.folder_entries import list_entries
from episodes.records.example_proto import encode_example, image_example_pieces
from episodes.records.tfrecord_io import frame_pieces, frame_record
from episodes.storage.parallel_reads import read_in_order
from episodes.storage.paths import read_local_file

RNG = np.random.default_rng(7)

OPTIONS = [
    ImageOptions(convention="meta-dataset", invert=True),  # Omniglot's reference pixels
    ImageOptions(convention="meta-dataset", jpeg_quality=75),
    ImageOptions(convention="meta-dataset", resize=28),
    ImageOptions(),  # original: RGB JPEG at 95
    ImageOptions(mode="L", image_format="png"),
    ImageOptions(mode="L", invert=True, jpeg_quality=80),
]


def pixels(mode: str, size: tuple[int, int] = (37, 23)) -> Image.Image:
    """A noisy image of `mode` (some structure, so JPEG blocks differ)."""
    width, height = size
    bands = {"1": 1, "L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "P": 1, "CMYK": 4}[mode]
    ramp = np.add.outer(np.arange(height) * 5, np.arange(width) * 3) % 256
    noise = RNG.integers(0, 80, size=(height, width, bands))
    array = ((ramp[..., None] + noise) % 256).astype(np.uint8)
    if mode == "1":
        return Image.fromarray(array[..., 0] > 128)
    if mode == "P":
        return Image.fromarray(array[..., 0]).convert("P", palette=Image.Palette.ADAPTIVE)
    if bands == 1:
        return Image.fromarray(array[..., 0], "L")
    return Image.fromarray(array, mode)


def encoded(image: Image.Image, fmt: str, **params) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **params)
    return buffer.getvalue()


def plain_process(monkeypatch, data: bytes, options: ImageOptions) -> bytes | str:
    """process_image with both fast paths off (PIL's Image.open and Image.save); a rejection
    as its message."""
    with monkeypatch.context() as patch:
        patch.setattr(codec_fast_paths, "_jpeg_settings", {q: None for q in range(1, 101)})
        patch.setattr("beam_pipelines.conversion.image_codec.decode_plain_png", lambda data: None)
        return outcome(data, options)


def outcome(data: bytes, options: ImageOptions) -> bytes | str:
    try:
        return process_image(data, options)
    except ImageRejected as exc:
        return f"rejected: {exc}"


def png_chunk(kind: bytes, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))
        + kind
        + payload
        + struct.pack(">I", zlib.crc32(kind + payload))
    )


def split_png(data: bytes) -> list[tuple[bytes, bytes]]:
    """(type, payload) of each chunk."""
    chunks, pos = [], 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        chunks.append((data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]))
        pos += 12 + length
    return chunks


def build_png(chunks: list[tuple[bytes, bytes]]) -> bytes:
    return codec_fast_paths.PNG_SIGNATURE + b"".join(png_chunk(k, p) for k, p in chunks)


PLAIN_MODES = ["1", "L", "LA", "RGB", "RGBA"]


@pytest.mark.parametrize("mode", PLAIN_MODES)
def test_plain_png_decodes_as_pil_does(mode):
    data = encoded(pixels(mode), "PNG")
    fast = decode_plain_png(data)
    assert fast is not None
    with Image.open(io.BytesIO(data)) as plain:
        plain.load()
        assert (fast.mode, fast.size, fast.info) == (plain.mode, plain.size, plain.info)
        assert fast.tobytes() == plain.tobytes()


def test_low_bit_depth_grey_png_decodes_as_pil_does():
    """2- and 4-bit greyscale (PIL reads them as L with rawmodes L;2, L;4)."""
    for depth in (2, 4):
        height, width = 9, 13
        levels = RNG.integers(0, 2**depth, size=(height, width))
        rows = []
        for row in levels:
            bits = "".join(format(int(v), f"0{depth}b") for v in row)
            bits += "0" * (-len(bits) % 8)
            rows.append(b"\x00" + int(bits, 2).to_bytes(len(bits) // 8, "big"))
        ihdr = struct.pack(">IIBBBBB", width, height, depth, 0, 0, 0, 0)
        data = build_png(
            [(b"IHDR", ihdr), (b"IDAT", zlib.compress(b"".join(rows))), (b"IEND", b"")]
        )
        fast = decode_plain_png(data)
        assert fast is not None
        plain = Image.open(io.BytesIO(data))
        plain.load()
        assert fast.mode == plain.mode == "L"
        assert fast.tobytes() == plain.tobytes()


@pytest.mark.parametrize("mode", [*PLAIN_MODES, "P"])
@pytest.mark.parametrize("options", OPTIONS, ids=range(len(OPTIONS)))
def test_png_conversion_bytes_are_the_plain_paths(monkeypatch, mode, options):
    data = encoded(pixels(mode, (41, 29)), "PNG")
    assert outcome(data, options) == plain_process(monkeypatch, data, options)


def test_png_split_into_several_idat_chunks(monkeypatch):
    data = encoded(pixels("RGB", (60, 50)), "PNG")
    chunks = split_png(data)
    (stream,) = [p for k, p in chunks if k == b"IDAT"]
    pieces = [stream[:10], b"", stream[10:200], stream[200:]]
    data = build_png([chunks[0], *[(b"IDAT", piece) for piece in pieces], (b"IEND", b"")])
    assert decode_plain_png(data) is not None
    for options in OPTIONS:
        assert outcome(data, options) == plain_process(monkeypatch, data, options)


def not_plain_pngs() -> dict[str, bytes]:
    """PNGs the fast path leaves to PIL (it returns None for each)."""
    base = encoded(pixels("RGB"), "PNG")
    chunks = split_png(base)
    ihdr, rest = chunks[0], chunks[1:]
    info = PngImagePlugin.PngInfo()
    info.add_text("comment", "a comment PIL's JPEG writer would copy")
    interlaced = bytearray(ihdr[1])
    interlaced[12] = 1
    broken_crc = bytearray(base)
    broken_crc[29] ^= 0xFF
    return {
        "text chunk": encoded(pixels("RGB"), "PNG", pnginfo=info),
        "palette": encoded(pixels("P"), "PNG"),
        "transparency": encoded(pixels("L"), "PNG", transparency=7),
        "16-bit": encoded(
            Image.fromarray((RNG.integers(0, 65535, (9, 9))).astype(np.uint16)), "PNG"
        ),
        "gamma": build_png([ihdr, (b"gAMA", struct.pack(">I", 45455)), *rest]),
        "interlace flag": build_png([(b"IHDR", bytes(interlaced)), *rest]),
        "broken header CRC": bytes(broken_crc),
        "no IEND": build_png([ihdr, *rest[:-1]]),
        "cut inside IDAT": base[: len(base) // 2],
        "IDAT cut short of its rows": build_png(
            [ihdr, (b"IDAT", zlib.compress(b"\x00" * 40)), (b"IEND", b"")]
        ),
        "damaged zlib stream": build_png(
            [ihdr, (b"IDAT", b"x\x9c\xff\xff\xff\xff"), (b"IEND", b"")]
        ),
        "empty": b"",
        "signature only": codec_fast_paths.PNG_SIGNATURE,
        "zero width": build_png([(b"IHDR", struct.pack(">IIBBBBB", 0, 5, 8, 2, 0, 0, 0)), *rest]),
    }


@pytest.mark.parametrize("name", sorted(not_plain_pngs()))
def test_pngs_left_to_pil_keep_its_outcome(monkeypatch, name):
    data = not_plain_pngs()[name]
    assert decode_plain_png(data) is None
    for options in OPTIONS:
        assert outcome(data, options) == plain_process(monkeypatch, data, options)


def test_oversized_png_is_left_to_pil(monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)
    data = encoded(pixels("L", (40, 30)), "PNG")
    assert decode_plain_png(data) is None


@pytest.mark.parametrize("mode", ["L", "RGB", "CMYK"])
@pytest.mark.parametrize("options", OPTIONS, ids=range(len(OPTIONS)))
def test_jpeg_conversion_bytes_are_the_plain_paths(monkeypatch, mode, options):
    """Converted JPEGs (grey, CMYK; RGB ones with the options that change them) are encoded by
    the fast writer with Image.save's bytes."""
    data = encoded(pixels(mode, (50, 34)), "JPEG", quality=90)
    assert outcome(data, options) == plain_process(monkeypatch, data, options)


def test_jpeg_with_a_comment_keeps_it(monkeypatch):
    """PIL copies an image's comment into the JPEG it writes: the fast writer leaves such an
    image to PIL."""
    data = encoded(pixels("CMYK"), "JPEG", comment=b"from the camera")
    options = ImageOptions(convention="meta-dataset")
    converted = outcome(data, options)
    assert b"from the camera" in converted
    assert converted == plain_process(monkeypatch, data, options)


@pytest.mark.parametrize("quality", [1, 50, 75, 95, 100])
@pytest.mark.parametrize("size", [(1, 1), (8, 8), (17, 9), (300, 7)])
def test_encode_jpeg_is_image_save(quality, size):
    image = pixels("RGB", size)
    assert encode_jpeg(image, quality) == encoded(image, "JPEG", quality=quality)


def test_encode_jpeg_leaves_other_images_to_pil():
    assert encode_jpeg(pixels("L"), 75) is None
    commented = pixels("RGB")
    commented.info["comment"] = b"x"
    assert encode_jpeg(commented, 75) is None


def test_local_file_reads(tmp_path):
    sizes = [0, 1, 421, 2**16, 2**16 + 1, 3 * 2**20 + 5]
    paths = []
    for size in sizes:
        path = tmp_path / f"f{size}"
        path.write_bytes(os.urandom(size))
        paths.append(str(path))
    for path in paths:
        assert read_local_file(path) == open(path, "rb").read()
    assert read_local_file("/proc/self/status" if os.path.exists("/proc") else paths[0])
    results = list(read_in_order([*paths, str(tmp_path), str(tmp_path / "missing")]))
    assert results[: len(paths)] == [open(p, "rb").read() for p in paths]
    for result, path in zip(results[len(paths) :], [tmp_path, tmp_path / "missing"]):
        with pytest.raises(OSError) as plain:
            open(path, "rb")
        assert isinstance(result, type(plain.value))
        assert (str(result), result.strerror) == (str(plain.value), plain.value.strerror)


def sliced_jpeg_header(data: bytes) -> JpegHeader | None:
    """jpeg_header as first written (slices and int.from_bytes per field), the reference of
    its struct-based walk."""
    if data[:3] != b"\xff\xd8\xff":
        return None
    pos, end, frame = 2, len(data), None
    while pos + 4 <= end:
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:
            pos += 1
            continue
        if marker in STANDALONE:
            pos += 2
            continue
        length = int.from_bytes(data[pos + 2 : pos + 4], "big")
        segment_end = pos + 2 + length
        if length < 2 or segment_end > end:
            return None
        if marker in SOF_MARKERS:
            if frame is not None or length < 8 or data[pos + 4] != 8:
                return None
            height = int.from_bytes(data[pos + 5 : pos + 7], "big")
            width = int.from_bytes(data[pos + 7 : pos + 9], "big")
            frame = (width, height, data[pos + 9])
        elif marker == 0xE2 and data[pos + 4 : pos + 8] == MULTI_PICTURE:
            return None
        elif marker == START_OF_SCAN:
            if frame is None or frame[0] < 1 or frame[1] < 1:
                return None
            return JpegHeader(*frame, segment_end)
        pos = segment_end
    return None


def test_jpeg_header_walk_on_damaged_headers():
    """Truncations and byte changes in the header segments: the same answer as the first
    version of the walk."""
    rng = np.random.default_rng(11)
    sources = [
        encoded(pixels("RGB", (31, 17)), "JPEG"),
        encoded(pixels("L", (9, 40)), "JPEG", quality=90),
        encoded(pixels("CMYK", (12, 12)), "JPEG"),
        encoded(pixels("RGB", (20, 20)), "JPEG", progressive=True, comment=b"c"),
    ]
    for data in sources:
        scan = jpeg_header(data)
        assert scan is not None and scan == sliced_jpeg_header(data)
        for cut in range(0, scan.scan_start + 3):
            assert jpeg_header(data[:cut]) == sliced_jpeg_header(data[:cut])
        for _ in range(600):
            damaged = bytearray(data)
            for at in rng.integers(0, scan.scan_start + 2, size=rng.integers(1, 4)):
                damaged[at] = int(rng.choice([0x00, 0x01, 0x08, 0xC0, 0xC2, 0xDA, 0xE2, 0xFF]))
            assert jpeg_header(bytes(damaged)) == sliced_jpeg_header(bytes(damaged))


@pytest.mark.parametrize("size", [0, 1, 127, 128, 16383, 16384, 2**21 - 20, 2**21 + 5])
@pytest.mark.parametrize("label", [0, 127, 128, 1581, 99_999])
def test_record_pieces_are_the_encoded_record(size, label):
    image = bytes(range(256)) * (size // 256) + bytes(size % 256)
    record = encode_example({"image": image, "label": [label]})
    assert b"".join(image_example_pieces(image, label)) == record
    assert b"".join(frame_pieces(image_example_pieces(image, label))) == frame_record(record)


def test_folder_listing_sorts_and_sorts_out_as_before(tmp_path):
    """list_entries reads regular files from their directory entries (no stat call): the same
    order and kinds as walking the Paths, links and special files still sorted out."""
    folder = tmp_path / "class"
    folder.mkdir()
    for name in ["b.png", "A.png", "a.png", "_x.jpg", "10.png", "9.png"]:
        (folder / name).write_bytes(b"x")
    (folder / "sub").mkdir()
    (folder / "link.png").symlink_to(folder / "a.png")
    (folder / "broken.png").symlink_to(tmp_path / "missing.png")
    (folder / "loop").symlink_to(folder)
    (folder / "self.png").symlink_to(folder / "self.png")
    os.mkfifo(folder / "pipe.png")
    listing = list_entries(folder)
    assert listing.files == sorted(
        p for p in folder.iterdir() if p.is_file() and p.name != "self.png"
    )
    assert listing.folders == [folder / "sub"]
    assert [(Path(p).name, reason.split(" (")[0]) for p, reason in listing.skipped] == [
        ("broken.png", "a broken symbolic link"),
        ("loop", "a folder loop: it leads back to " + str(folder) + ", which contains it"),
        ("pipe.png", "a named pipe"),
        ("self.png", "a symbolic link loop"),
    ]
