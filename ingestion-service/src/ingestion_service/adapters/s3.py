"""Reading source objects from S3 / MinIO with boto3 (synchronous: call from a worker thread)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ingestion_service.errors import PayloadTooLargeError, S3FetchError, ShuttingDownError
from ingestion_service.settings import Settings
from shared_contract.redact import redact_secrets

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# A read blocks until its piece is complete, and the abort flag is checked between pieces: small
# pieces keep a shutdown prompt even when the endpoint trickles.
CHUNK_BYTES = 16 * 1024
_DESCRIPTION_CHARS = 300


def build_s3_client(settings: Settings) -> S3Client:
    """A boto3 S3 client for S3_ENDPOINT_URL (path-style addressing, which MinIO needs)."""
    access = settings.s3_access_key_id.get_secret_value() if settings.s3_access_key_id else None
    secret = settings.s3_secret_access_key.get_secret_value() if settings.s3_secret_access_key else None
    config = Config(
        region_name=settings.s3_region,
        connect_timeout=settings.s3_connect_timeout,
        read_timeout=settings.s3_read_timeout,
        retries={"max_attempts": 3, "mode": "standard"},
        s3={"addressing_style": "path"},
        signature_version="s3v4",
    )
    client: S3Client = boto3.client(
        "s3",
        endpoint_url=settings.s3_endpoint_url,
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        config=config,
    )
    return client


def _describe(exc: Exception) -> str:
    """What failed, for logs: S3's error code, or botocore's text with the endpoint URL redacted
    (S3_ENDPOINT_URL may carry ``user:pass@``)."""
    if isinstance(exc, ClientError):
        error: Any = exc.response.get("Error", {})
        return f"{type(exc).__name__}: {error.get('Code', 'unknown')}"
    text = redact_secrets(" ".join(str(exc).split()))[:_DESCRIPTION_CHARS]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(frozen=True)
class ObjectHead:
    """What ``head_object`` says about an object: size, ETag (quotes kept, as S3 lists it) and x-amz-meta-* keys."""

    size: int
    etag: str | None
    metadata: dict[str, str] = field(default_factory=lambda: dict[str, str]())


class S3Source:
    """Size checks and capped, streamed downloads of one object at a time."""

    def __init__(self, client: S3Client) -> None:
        self._client = client
        self._aborted = threading.Event()

    def abort(self) -> None:
        """Stop every running and later download with SHUTTING_DOWN (the runtime calls it at shutdown):
        a download is a worker thread that neither the server's cancellation nor its grace can end."""
        self._aborted.set()

    def close(self) -> None:
        """Close the client's connection pool (the runtime calls it at shutdown)."""
        self._client.close()

    def head(self, bucket: str, key: str) -> ObjectHead:
        """The object's size, ETag and user metadata from ``head_object``."""
        try:
            head = self._client.head_object(Bucket=bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            # Not chained: botocore's error names the endpoint URL unredacted; _describe keeps it redacted.
            raise S3FetchError(f"head_object failed: {_describe(exc)}") from None
        metadata = {str(name).lower(): str(value) for name, value in (head.get("Metadata") or {}).items()}
        return ObjectHead(size=int(head["ContentLength"]), etag=str(head.get("ETag") or "") or None, metadata=metadata)

    def list_keys(self, bucket: str, prefix: str, *, max_keys: int) -> list[str]:
        """The keys under ``prefix`` (``list_objects_v2``, every page), at most ``max_keys``; folder markers
        (keys ending in "/") left out."""
        keys: list[str] = []
        try:
            paginator = self._client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    key = item.get("Key", "")
                    if key and not key.endswith("/"):
                        keys.append(key)
                    if len(keys) >= max_keys:
                        return keys
        except (ClientError, BotoCoreError) as exc:
            raise S3FetchError(f"list_objects_v2 failed: {_describe(exc)}") from None  # not chained: see head
        return keys

    def download(self, bucket: str, key: str, destination: Path, *, max_bytes: int) -> int:
        """Stream the object into ``destination`` piece by piece; the cap holds even if it grew.

        ``abort`` stops it between pieces with ShuttingDownError; a failed download leaves no file.
        """
        written = 0
        try:
            if self._aborted.is_set():
                raise ShuttingDownError("shutting down: S3 download not started")
            response = self._client.get_object(Bucket=bucket, Key=key)
            body = response["Body"]
            try:
                with destination.open("wb") as handle:
                    for piece in body.iter_chunks(CHUNK_BYTES):
                        if self._aborted.is_set():
                            raise ShuttingDownError("shutting down: S3 download aborted")
                        written += len(piece)
                        if written > max_bytes:
                            raise PayloadTooLargeError(max_bytes)
                        handle.write(piece)
            finally:
                body.close()  # an abandoned body's connection must not go back to the pool
        except (ClientError, BotoCoreError) as exc:
            destination.unlink(missing_ok=True)
            raise S3FetchError(f"get_object failed: {_describe(exc)}") from None  # not chained: see head
        except BaseException:
            destination.unlink(missing_ok=True)
            raise
        return written
