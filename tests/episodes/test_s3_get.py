"""Whole S3 objects by one signed GET (episodes.storage.s3_get): the signature is botocore's
to the byte, the bytes are boto3's, and every answer but 200 goes through boto3 as before."""

from __future__ import annotations

import datetime
from types import SimpleNamespace

import botocore.auth
import numpy as np
import pytest
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from episodes.storage import s3_get

NOW = datetime.datetime(2026, 11, 29, 1, 2, 3)


@pytest.mark.parametrize("token", [None, "session-token/with+chars="])
@pytest.mark.parametrize(
    "url",
    [
        "https://store.example:9000/raw/omniglot/Latin/character01/0101_01.png",
        "https://store.example/raw/a%20key/%C3%A9t%C3%A9/x~y_z-1.jpg",
    ],
)
def test_the_signature_is_botocores(monkeypatch, url, token):
    """SigV4 as botocore's S3 signer writes it for the same GET, to the byte."""
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: NOW)
    request = AWSRequest(method="GET", url=url)
    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    botocore.auth.S3SigV4Auth(credentials, "s3", "eu-west-3").add_auth(request)
    ours = s3_get.authorization_headers(
        url,
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        token,
        "eu-west-3",
        NOW.replace(tzinfo=datetime.timezone.utc).timestamp(),
    )
    assert ours["authorization"] == request.headers["Authorization"]
    assert ours["x-amz-date"] == request.headers["X-Amz-Date"]
    assert ours["x-amz-content-sha256"] == request.headers["X-Amz-Content-SHA256"]
    assert ours.get("x-amz-security-token") == token


def _client(endpoint: str, style: str | None = None):
    return SimpleNamespace(
        meta=SimpleNamespace(
            endpoint_url=endpoint, config=SimpleNamespace(s3={"addressing_style": style})
        )
    )


def test_object_urls_are_path_style_at_the_clients_endpoint_and_quoted(monkeypatch):
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    url = s3_get._object_url(_client("http://127.0.0.1:9000/"), "raw", "a b/é+x.png")
    assert url == "http://127.0.0.1:9000/raw/a%20b/%C3%A9%2Bx.png"
    # AWS's own endpoints address buckets as virtual hosts: those GETs stay with boto3
    assert s3_get._object_url(_client("https://s3.eu-west-3.amazonaws.com"), "raw", "k") is None
    assert s3_get._object_url(_client("http://minio:9000", "virtual"), "raw", "k") is None
    assert s3_get._object_url(_client("https://s3.amazonaws.com", "path"), "raw", "k") == (
        "https://s3.amazonaws.com/raw/k"
    )
    # a proxy the environment names is boto3's to use
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "localhost")
    assert s3_get._object_url(_client("https://minio.example:9000"), "raw", "k") is None
    monkeypatch.setenv("NO_PROXY", "minio.example")
    assert s3_get._object_url(_client("https://minio.example:9000"), "raw", "k") is not None


@pytest.mark.slow
def test_objects_come_back_as_boto3_reads_them_without_boto3(s3, monkeypatch):
    """Against the moto server: the same bytes as boto3's get_object, which is never called;
    a missing object is boto3's OSError naming the URL, and the fast path stays on after it."""
    from episodes.storage import paths as storage_paths

    storage_paths.use_options(s3.runner().options)
    rng = np.random.default_rng(1)
    blobs = [rng.bytes(int(rng.integers(0, 50_000))) for _ in range(12)]
    urls = [f"s3://raw/signed/{i:02d} é+{i}.bin" for i in range(len(blobs))]
    for url, blob in zip(urls, blobs):
        s3.put(url, blob)
    client = storage_paths._shared_s3_client()
    assert [
        client.get_object(Bucket="raw", Key=u[len("s3://raw/") :])["Body"].read() for u in urls
    ] == blobs

    calls = []
    original = client.get_object
    monkeypatch.setattr(client, "get_object", lambda **kw: calls.append(kw) or original(**kw))
    assert [storage_paths.read_bytes(u) for u in urls] == blobs
    assert calls == []
    with pytest.raises(OSError, match="s3://raw/signed/missing.bin"):
        storage_paths.read_bytes("s3://raw/signed/missing.bin")
    assert calls == [{"Bucket": "raw", "Key": "signed/missing.bin"}]
    assert storage_paths.read_bytes(urls[0]) == blobs[0] and len(calls) == 1


@pytest.mark.slow
def test_a_refused_signature_hands_the_bucket_to_boto3(s3, monkeypatch):
    """A store that answers the signed GET with anything but 200 or 404 gets boto3's request
    instead, once per object read, and the fast path is off for that bucket afterwards."""
    from episodes.storage import paths as storage_paths

    storage_paths.use_options(s3.runner().options)
    s3.put("s3://raw/refused/a.bin", b"a" * 10)
    s3.put("s3://raw/refused/b.bin", b"b" * 10)
    client = storage_paths._shared_s3_client()
    monkeypatch.setattr(s3_get, "_OFF", set())
    sent = []
    monkeypatch.setattr(s3_get, "_fast_get", lambda *a: sent.append(a) or 403)
    assert storage_paths.read_bytes("s3://raw/refused/a.bin") == b"a" * 10
    assert storage_paths.read_bytes("s3://raw/refused/b.bin") == b"b" * 10
    assert len(sent) == 1 and (id(client), "raw") in s3_get._OFF
