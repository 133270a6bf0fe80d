"""Encode and decode `tf.train.Example` protos in pure Python (no TensorFlow).

Only the wire format is needed: Example{features: Features{feature: map<string, Feature>}} with
Feature oneof {bytes_list=1, float_list=2, int64_list=3}. Keys are written in sorted order so the
same features always give the same bytes (protobuf map order is otherwise unspecified).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping, Sequence

from episodes.util.cli_errors import UserError

__all__ = [
    "ExampleDecodeError",
    "decode_example",
    "decode_image_example",
    "encode_example",
    "encode_image_example",
    "image_example_pieces",
]

FeatureValue = bytes | Sequence[bytes] | Sequence[int] | Sequence[float] | int | float

_WT_VARINT = 0
_WT_I64 = 1
_WT_LEN = 2
_WT_I32 = 5


class ExampleDecodeError(UserError, ValueError):
    """Bytes that are not a well-formed tf.train.Example."""


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number: int, wire_type: int) -> bytes:
    return _varint((number << 3) | wire_type)


def _len_delimited(number: int, payload: bytes) -> bytes:
    return _field(number, _WT_LEN) + _varint(len(payload)) + payload


def _encode_feature(value: FeatureValue) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        values: list = [bytes(value)]
    elif isinstance(value, bool | int | float):
        values = [value]
    else:
        values = list(value)
    if not values:
        return _len_delimited(1, b"")  # empty bytes_list
    first = values[0]
    if isinstance(first, bytes | bytearray | memoryview):
        inner = b"".join(_len_delimited(1, bytes(v)) for v in values)
        return _len_delimited(1, inner)
    if isinstance(first, float):
        packed = struct.pack(f"<{len(values)}f", *values)
        return _len_delimited(2, _len_delimited(1, packed))
    packed = b"".join(_varint(int(v)) for v in values)
    return _len_delimited(3, _len_delimited(1, packed))


def encode_example(features: Mapping[str, FeatureValue]) -> bytes:
    """Serialise a mapping of feature name to bytes / ints / floats as a tf.train.Example."""
    entries = []
    for key in sorted(features):
        entry = _len_delimited(1, key.encode("utf-8")) + _len_delimited(
            2, _encode_feature(features[key])
        )
        entries.append(_len_delimited(1, entry))
    return _len_delimited(1, b"".join(entries))


def _read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise ExampleDecodeError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ExampleDecodeError("varint too long")


def _iter_fields(buf: memoryview):
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = _read_varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == _WT_LEN:
            length, pos = _read_varint(buf, pos)
            if pos + length > end:
                raise ExampleDecodeError("length-delimited field past the end")
            yield number, wire_type, buf[pos : pos + length]
            pos += length
        elif wire_type == _WT_VARINT:
            value, pos = _read_varint(buf, pos)
            yield number, wire_type, value
        elif wire_type == _WT_I64:
            yield number, wire_type, buf[pos : pos + 8]
            pos += 8
        elif wire_type == _WT_I32:
            yield number, wire_type, buf[pos : pos + 4]
            pos += 4
        else:
            raise ExampleDecodeError(f"unsupported wire type {wire_type}")


def _decode_feature(buf: memoryview) -> list:
    values: list = []
    for kind, _, list_buf in _iter_fields(buf):
        for number, wire_type, item in _iter_fields(list_buf):
            if number != 1:
                continue
            if kind == 1:
                values.append(bytes(item))
            elif kind == 2:
                if wire_type == _WT_LEN:
                    values.extend(struct.unpack(f"<{len(item) // 4}f", item))
                else:
                    values.append(struct.unpack("<f", item)[0])
            elif kind == 3:
                if wire_type == _WT_LEN:
                    pos = 0
                    while pos < len(item):
                        value, pos = _read_varint(item, pos)
                        values.append(value - (1 << 64) if value >= 1 << 63 else value)
                else:
                    values.append(item - (1 << 64) if item >= 1 << 63 else item)
    return values


def decode_example(data: bytes) -> dict[str, list]:
    """Parse a serialised tf.train.Example into {name: list of bytes | int | float}."""
    features: dict[str, list] = {}
    buf = memoryview(data)
    for number, wire_type, features_buf in _iter_fields(buf):
        if number != 1 or wire_type != _WT_LEN:
            continue
        for _, _, entry in _iter_fields(features_buf):
            key = None
            value: list = []
            for entry_number, _, entry_value in _iter_fields(entry):
                if entry_number == 1:
                    key = bytes(entry_value).decode("utf-8")
                elif entry_number == 2:
                    value = _decode_feature(entry_value)
            if key is None:
                raise ExampleDecodeError("feature map entry without a key")
            features[key] = value
    return features


_IMAGE_KEY = _len_delimited(1, b"image")


@functools.lru_cache(maxsize=4096)
def _label_entry(label: int) -> bytes:
    """The `label` map entry of a record of class `label` (the same bytes for every record)."""
    return _len_delimited(
        1, _len_delimited(1, b"label") + _len_delimited(2, _encode_feature([label]))
    )


def encode_image_example(image: bytes, label: int) -> bytes:
    """The converted-dataset record: `image` (encoded bytes) and `label` (int64 class id).
    The bytes of `encode_example({"image": image, "label": [label]})`."""
    return b"".join(image_example_pieces(image, label))


def _uvarint(value: int) -> bytes:
    """`_varint` of a non-negative int, the sizes of a record's fields without a loop."""
    if value < 0x80:
        return _SMALL_VARINTS[value]
    if value < 0x4000:
        return bytes((value & 0x7F | 0x80, value >> 7))
    if value < 0x200000:
        return bytes((value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14))
    return _varint(value)


_SMALL_VARINTS = [bytes((value,)) for value in range(0x80)]


def image_example_pieces(image: bytes, label: int) -> tuple[bytes, bytes, bytes]:
    """`encode_image_example` as (head, image, tail), built from the fixed pieces around the
    image without copying it (a conversion encodes one record per image)."""
    image = bytes(image)
    n_varint = _uvarint(len(image))
    bytes_list = 1 + len(n_varint) + len(image)  # BytesList{value: image}
    bytes_list_varint = _uvarint(bytes_list)
    feature = 1 + len(bytes_list_varint) + bytes_list  # Feature{bytes_list}
    feature_varint = _uvarint(feature)
    entry = len(_IMAGE_KEY) + 1 + len(feature_varint) + feature
    entry_varint = _uvarint(entry)
    tail = _label_entry(int(label))
    entries = 1 + len(entry_varint) + entry + len(tail)
    head = b"".join(
        (
            b"\n",
            _uvarint(entries),
            b"\n",
            entry_varint,
            _IMAGE_KEY,
            b"\x12",
            feature_varint,
            b"\n",
            bytes_list_varint,
            b"\n",
            n_varint,
        )
    )
    return head, image, tail


def decode_image_example(data: bytes) -> tuple[bytes, int]:
    """Return (encoded image bytes, label) of a converted-dataset record."""
    features = decode_example(data)
    try:
        (image,) = features["image"]
        (label,) = features["label"]
    except (KeyError, ValueError) as exc:
        raise ExampleDecodeError(
            f"record lacks a single 'image' bytes and 'label' int64 feature: {sorted(features)}"
        ) from exc
    return image, int(label)
