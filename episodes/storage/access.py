"""One quick access check of an object-storage URL before any long work starts.

Without credentials or a reachable endpoint, Beam's file systems retry for minutes (S3: ~7-8
minutes and ~60 warning lines before an error; GCS: ~30 s of credential retries, then an
anonymous request) before anything says what is wrong. `check_access(url, timeout_s)` makes
one request with a short timeout and no retries (list one object under the URL) and raises
one OSError naming the URL and what is missing: credentials, the endpoint, the bucket, the
client library, or permission.
"""

from __future__ import annotations

import errno
import os
from typing import Any

from episodes.storage.uploads import bucket_and_key
from episodes.util.cli_errors import UserError

__all__ = ["DEFAULT_TIMEOUT_S", "S3_CREDENTIALS", "StorageAccessError", "check_access"]

DEFAULT_TIMEOUT_S = 10.0
S3_CREDENTIALS = (
    "--s3_access_key_id/--s3_secret_access_key, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
    "or an AWS profile"
)


class StorageAccessError(UserError, OSError):
    """An object-storage URL cannot be reached; the message says what is missing."""


def _fail(url: str, what: str) -> StorageAccessError:
    return StorageAccessError(errno.EIO, what, url)  # EIO: no permission hint appended


def check_access(url: str, options: Any, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Raise StorageAccessError unless one listing request under `url` answers in time.
    s3:// and gs:// are checked; other schemes are left to Beam."""
    scheme = str(url).split("://", 1)[0].lower()
    if scheme == "s3":
        _check_s3(str(url), options, timeout_s)
    elif scheme == "gs":
        _check_gcs(str(url), options, timeout_s)


def _check_s3(url: str, options: Any, timeout_s: float) -> None:
    try:
        import boto3
        from botocore import exceptions as boto_errors
        from botocore.config import Config
    except ImportError:
        raise _fail(
            url, "s3:// needs boto3 (pip install boto3, pinned in requirements.lock)"
        ) from None
    from apache_beam.options.pipeline_options import S3Options

    s3 = options.view_as(S3Options)
    endpoint = s3.s3_endpoint_url
    where = endpoint or "AWS S3"
    client = boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        region_name=s3.s3_region_name,
        aws_access_key_id=s3.s3_access_key_id,
        aws_secret_access_key=s3.s3_secret_access_key,
        aws_session_token=s3.s3_session_token,
        use_ssl=not s3.s3_disable_ssl,
        verify=s3.s3_verify,
        config=Config(
            connect_timeout=timeout_s, read_timeout=timeout_s, retries={"max_attempts": 1}
        ),
    )
    bucket, prefix = bucket_and_key(url)
    try:
        client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except boto_errors.NoCredentialsError:
        raise _fail(url, f"no S3 credentials found; pass {S3_CREDENTIALS}") from None
    except (
        boto_errors.EndpointConnectionError,
        boto_errors.ConnectTimeoutError,
        boto_errors.ReadTimeoutError,
    ):
        raise _fail(
            url,
            f"no answer from {where} within --storage-timeout {timeout_s:g} s (check "
            "--s3_endpoint_url and the network)",
        ) from None
    except boto_errors.ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "NoSuchBucket":
            raise _fail(url, f"no bucket {bucket!r} at {where}") from None
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403"):
            raise _fail(url, f"access denied by {where} ({code}); check {S3_CREDENTIALS}") from None
        raise _fail(url, f"{where} refused the listing ({code or exc})") from None
    except boto_errors.BotoCoreError as exc:
        raise _fail(url, f"cannot reach {where} ({type(exc).__name__}: {exc})") from None


def _check_gcs(url: str, options: Any, timeout_s: float) -> None:
    try:
        from google.api_core import exceptions as api_errors
        from google.auth import exceptions as auth_errors
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage
    except ImportError:
        raise _fail(
            url,
            "gs:// needs google-cloud-storage (pinned in requirements.lock: pip install -r "
            "requirements.lock, or pip install 'apache-beam[gcp]')",
        ) from None
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    project = options.view_as(GoogleCloudOptions).project
    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    anonymous = emulator is not None or not _beam_uses_credentials()
    try:
        if anonymous:
            client = storage.Client(
                project=project or "anonymous", credentials=AnonymousCredentials()
            )
        else:
            client = storage.Client(project=project)
    except auth_errors.DefaultCredentialsError:
        raise _fail(
            url,
            "no Google credentials found; run `gcloud auth application-default login` or set "
            "GOOGLE_APPLICATION_CREDENTIALS",
        ) from None
    bucket, prefix = bucket_and_key(url)
    where = emulator or "Google Cloud Storage"
    try:
        blobs = client.list_blobs(
            bucket, prefix=prefix, max_results=1, timeout=timeout_s, retry=None
        )
        list(blobs)
    except api_errors.NotFound:
        raise _fail(url, f"no bucket {bucket!r} at {where}") from None
    except (api_errors.Forbidden, api_errors.Unauthorized) as exc:
        advice = (
            "Beam reads gs:// anonymously here: pip install google-auth-httplib2 (or "
            "'apache-beam[gcp]') and set up Google credentials"
            if anonymous and emulator is None
            else "check the account's permissions on the bucket"
        )
        raise _fail(url, f"access denied ({exc.code}); {advice}") from None
    except Exception as exc:  # requests' connection errors and timeouts, and the like
        raise _fail(
            url,
            f"no answer from {where} within --storage-timeout {timeout_s:g} s "
            f"({type(exc).__name__})",
        ) from None


def _beam_uses_credentials() -> bool:
    """Whether Beam's GCS client looks for Google credentials (it needs google-auth-httplib2;
    without it, it connects anonymously)."""
    try:
        import google_auth_httplib2  # noqa: F401
    except ImportError:
        return False
    return True
