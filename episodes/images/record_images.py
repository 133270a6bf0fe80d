"""Images of converted-dataset records: record k of class c -> encoded bytes -> pixels.

One class per dataset's records, used by the reader's own threads and by its decoding worker
processes alike, so both raise the same errors: a record out of range names the file, class and
record; a corrupt record or an undecodable image names the file, class and record number.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from episodes.images.image_decode import (
    DEFAULT_RESIZE,
    ImageDecodeError,
    check_resize,
    decode_image_into,
)
from episodes.records.example_proto import ExampleDecodeError, decode_image_example
from episodes.records.reader_errors import ReaderError
from episodes.records.record_reader import CorruptRecordError, RecordReader

__all__ = ["RecordImages", "image_of_record"]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + 1
        shift += 7


def image_of_record(payload: bytes) -> bytes | None:
    """The `image` bytes of a converted-dataset record, parsed in a few steps.

    A fast path of `example_proto.decode_image_example` for the usual layout (a features map
    whose `image` entry holds one bytes value); returns None for anything else, so the caller
    falls back to the general decoder (which also explains malformed records)."""
    try:
        if payload[0] != 0x0A:  # Example.features, length-delimited
            return None
        length, pos = _varint(payload, 1)
        end = pos + length
        if end != len(payload):
            return None
        while pos < end:
            if payload[pos] != 0x0A:  # Features.feature map entry
                return None
            length, pos = _varint(payload, pos + 1)
            entry_end = pos + length
            if payload[pos] != 0x0A:  # entry key
                return None
            key_length, pos = _varint(payload, pos + 1)
            key = payload[pos : pos + key_length]
            pos += key_length
            if key == b"image":
                # value: Feature{bytes_list{value: image}}: tags 0x12, 0x0A, 0x0A
                if payload[pos] != 0x12:
                    return None
                _, pos = _varint(payload, pos + 1)
                if payload[pos] != 0x0A:
                    return None
                list_length, pos = _varint(payload, pos + 1)
                if payload[pos] != 0x0A:
                    return None
                image_length, start = _varint(payload, pos + 1)
                if start + image_length != pos + list_length or pos + list_length != entry_end:
                    return None
                return payload[start : start + image_length]
            pos = entry_end
    except IndexError:
        return None
    return None


class RecordImages:
    """Encoded and decoded images of one converted dataset's records (CRC-verified reads),
    resized by `resize` (`episodes.images.image_decode.RESIZE_MODES`)."""

    def __init__(self, records: RecordReader, resize: str = DEFAULT_RESIZE):
        self.records = records
        self.resize = check_resize(resize)

    def _corrupt(self, class_id: int, k: int, exc: Exception) -> CorruptRecordError:
        return CorruptRecordError(
            f"corrupt record: file {self.records.records_path(class_id)}, class {class_id}, "
            f"record {k}: {exc}"
        )

    def _out_of_range(self, class_id: int, k: int, why: object) -> ReaderError:
        return ReaderError(
            f"file {self.records.records_path(class_id)}, class {class_id}: record {k} "
            f"requested but {why}"
        )

    def check_rows(self, rows: Sequence[tuple[int, int, int]]) -> None:
        """Load (or build) the index of every class of (row, class id, record) triples and
        check each record is in range: errors raised here, before work is handed out."""
        highest: dict[int, int] = {}
        for _, class_id, k in rows:
            if k > highest.get(class_id, -1):
                highest[class_id] = k
            if k < 0:
                raise self._out_of_range(class_id, k, "record numbers start at 0")
        for class_id, k in highest.items():
            count = self.records.num_records(class_id)
            if k >= count:
                raise self._out_of_range(class_id, k, f"the file has {count} records")

    def encoded(self, class_id: int, k: int) -> bytes:
        """Encoded image bytes of record k (CRC-verified)."""
        try:
            payload = self.records.read_payload(class_id, k)
        except IndexError as exc:
            raise self._out_of_range(class_id, k, exc) from None
        image = image_of_record(payload)
        if image is None:
            try:
                image, _ = decode_image_example(payload)
            except ExampleDecodeError as exc:
                raise self._corrupt(class_id, k, exc) from exc
        return image

    def decode_rows(self, rows: Sequence[tuple[int, int, int]], images: np.ndarray) -> None:
        """Decode (row, class id, record) triples into images[row], reading each class's
        records together (`RecordReader.read_payloads`)."""
        by_class: dict[int, list[tuple[int, int]]] = {}
        for row, class_id, k in rows:
            by_class.setdefault(class_id, []).append((row, k))
        for class_id, items in by_class.items():
            ks = [k for _, k in items]
            try:
                payloads = self.records.read_payloads(class_id, ks)
            except IndexError:
                for k in ks:  # the record out of range, with encoded()'s message
                    self.encoded(class_id, k)
                raise
            for (row, k), payload in zip(items, payloads):
                image = image_of_record(payload)
                if image is None:
                    image = self.encoded(class_id, k)
                try:
                    decode_image_into(image, images[row], self.resize)
                except ImageDecodeError as exc:
                    raise self._corrupt(class_id, k, exc) from None

    def close(self) -> None:
        self.records.close()
