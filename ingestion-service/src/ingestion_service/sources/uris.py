"""A source's URI checked and normalised at registration: folders and files under SOURCE_FOLDER_ROOTS,
S3 prefixes of allowed buckets, http(s) URLs by the fetcher's own rules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import anyio.to_thread

from ingestion_service.adapters.url_fetcher import UrlFetcher
from ingestion_service.errors import SourceNotAllowedError
from ingestion_service.settings import Settings
from ingestion_service.sources.model import SourceKind


@dataclass(frozen=True)
class S3Prefix:
    """``s3://bucket/prefix``; ``prefix`` without slashes at its ends ("" = the whole bucket)."""

    bucket: str
    prefix: str

    @property
    def key_prefix(self) -> str:
        # "docs" must not match "docs2/x": list under "docs/".
        return f"{self.prefix}/" if self.prefix else ""


def parse_s3(uri: str) -> S3Prefix:
    """The bucket and prefix of ``s3://bucket[/prefix]``."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return S3Prefix(bucket, prefix.strip("/"))


def local_path(uri: str) -> Path:
    """The path a ``file://`` URI or an absolute path names."""
    return Path(unquote(urlsplit(uri).path)) if uri.startswith("file://") else Path(uri)


def _under_roots(settings: Settings, uri: str, *, folder: bool) -> str:
    roots = settings.folder_roots
    what = "folder" if folder else "file"
    if not roots:
        raise SourceNotAllowedError(f"Invalid request: {what} sources are off (SOURCE_FOLDER_ROOTS is empty).")
    path = local_path(uri)
    if not path.is_absolute():
        raise SourceNotAllowedError(f"Invalid request: a {what} source needs an absolute path or a file:// URI.")
    resolved = path.resolve()
    if not any(resolved.is_relative_to(root) for root in roots):
        raise SourceNotAllowedError(f"Invalid request: the {what} is not under SOURCE_FOLDER_ROOTS.")
    if folder and not resolved.is_dir():
        raise SourceNotAllowedError("Invalid request: no such folder on the server.")
    if not folder and not resolved.is_file():
        raise SourceNotAllowedError("Invalid request: no such file on the server.")
    return resolved.as_uri()


async def normalised_uri(settings: Settings, fetcher: UrlFetcher, uri: str, kind: SourceKind) -> str:
    """``uri`` as the source keeps it (``rag sync``'s root URI for folders and prefixes), or a refusal."""
    if kind in ("folder", "file"):
        if uri.startswith(("http://", "https://", "s3://")):
            raise SourceNotAllowedError(f"Invalid request: a {kind} source is a path or a file:// URI.")
        return await anyio.to_thread.run_sync(lambda: _under_roots(settings, uri, folder=kind == "folder"))
    if kind == "s3":
        if not uri.startswith("s3://"):
            raise SourceNotAllowedError("Invalid request: an s3 source is s3://bucket/prefix.")
        location = parse_s3(uri)
        if not location.bucket:
            raise SourceNotAllowedError("Invalid request: the s3:// URI names no bucket.")
        allowed = settings.allowed_buckets
        if allowed and location.bucket not in allowed:
            raise SourceNotAllowedError("Invalid request: the bucket is not in S3_ALLOWED_BUCKETS.")
        return f"s3://{location.bucket}/{location.prefix}" if location.prefix else f"s3://{location.bucket}"
    if not uri.startswith(("http://", "https://")):
        raise SourceNotAllowedError(f"Invalid request: a {kind} source is an http(s) URL.")
    await fetcher.check(uri)
    return uri.split("#", 1)[0]
