"""Writing S3 objects with bounded memory and no billed debris.

Beam's S3 writer starts a multipart upload for every object (even a 40-byte index), buffers a
5 MB part per open stream, and completes the upload when the stream is closed, also when it is
closed by an exception (publishing a partial object); a killed process leaves its uploads open
(S3 keeps and bills their parts until someone aborts them). `S3ObjectWriter` instead:
  - sends an object smaller than one part in one PUT (no multipart upload to leave behind);
  - holds at most one part (PART_BYTES) in memory, whatever the object's size;
  - aborts its multipart upload when the write fails or the `with` block raises.
`abort_uploads(url)` aborts every open multipart upload under a prefix: a failed job's staging
prefix, and the leftovers of killed runs (see storage_paths.remove_remote_leftovers).
"""

from __future__ import annotations

from typing import Any

__all__ = ["PART_BYTES", "S3ObjectWriter", "abort_uploads", "bucket_and_key", "open_uploads"]

PART_BYTES = 8 * 2**20  # S3's minimum part is 5 MiB (all parts but the last)


def bucket_and_key(url: str) -> tuple[str, str]:
    """`s3://bucket/key` (or gs://...) -> (bucket, key); the key is a prefix for a folder."""
    bucket, _, key = str(url).split("://", 1)[1].partition("/")
    return bucket, key


class S3ObjectWriter:
    """A binary stream writing one S3 object; see the module docstring."""

    def __init__(self, client: Any, url: str, part_bytes: int = PART_BYTES):
        self.client = client
        self.url = url
        self.bucket, self.key = bucket_and_key(url)
        self.part_bytes = part_bytes
        self.buffer = bytearray()
        self.upload_id: str | None = None
        self.parts: list[dict] = []
        self.closed = False

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:
        if self.closed:
            raise ValueError(f"{self.url}: write to a closed object stream")
        self.buffer += data
        try:
            while len(self.buffer) >= self.part_bytes:
                self._send_part(bytes(self.buffer[: self.part_bytes]))
                del self.buffer[: self.part_bytes]
        except BaseException:
            self.abort()
            raise
        return len(data)

    def _send_part(self, data: bytes) -> None:
        if self.upload_id is None:
            started = self.client.create_multipart_upload(Bucket=self.bucket, Key=self.key)
            self.upload_id = started["UploadId"]
        number = len(self.parts) + 1
        sent = self.client.upload_part(
            Bucket=self.bucket,
            Key=self.key,
            UploadId=self.upload_id,
            PartNumber=number,
            Body=data,
        )
        self.parts.append({"ETag": sent["ETag"], "PartNumber": number})

    def close(self) -> None:
        """Publish the object (one PUT, or the last part and the completion)."""
        if self.closed:
            return
        try:
            if self.upload_id is None:
                self.client.put_object(Bucket=self.bucket, Key=self.key, Body=bytes(self.buffer))
            else:
                if self.buffer or not self.parts:
                    self._send_part(bytes(self.buffer))
                self.client.complete_multipart_upload(
                    Bucket=self.bucket,
                    Key=self.key,
                    UploadId=self.upload_id,
                    MultipartUpload={"Parts": self.parts},
                )
        except BaseException:
            self.abort()
            raise
        self.closed = True
        self.buffer = bytearray()

    def abort(self) -> None:
        """Drop what was written: nothing is published, no upload is left open."""
        self.closed = True
        self.buffer = bytearray()
        if self.upload_id is not None:
            upload_id, self.upload_id = self.upload_id, None
            try:
                self.client.abort_multipart_upload(
                    Bucket=self.bucket, Key=self.key, UploadId=upload_id
                )
            except Exception:  # the next run's abort_uploads finds it
                pass

    def __enter__(self) -> S3ObjectWriter:
        return self

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def open_uploads(client: Any, url: str) -> list[tuple[str, str]]:
    """(key, upload id) of every multipart upload open under the prefix `url`."""
    bucket, prefix = bucket_and_key(url)
    found = []
    for page in client.get_paginator("list_multipart_uploads").paginate(
        Bucket=bucket, Prefix=prefix
    ):
        found += [(u["Key"], u["UploadId"]) for u in page.get("Uploads", [])]
    return found


def abort_uploads(client: Any, url: str) -> int:
    """Abort every multipart upload open under the prefix `url`; how many there were."""
    bucket, _ = bucket_and_key(url)
    uploads = open_uploads(client, url)
    for key, upload_id in uploads:
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
    return len(uploads)
