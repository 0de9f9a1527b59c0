"""Listing the source: a folder's files (hashed in worker threads) or an S3 prefix's objects."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.progress import Progress, TaskID

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

from rag_cli.ignores import FolderFilter, IgnoreRules, UnreadableFolderError
from rag_cli.sync.plan import (
    HASH_WORKERS,
    FolderSource,
    S3Source,
    Source,
    SourceEntry,
    SourceError,
    SyncAbortedError,
    SyncOptions,
    is_hidden,
)


def _digest(path: Path) -> tuple[str, int]:
    """sha256 (streamed) and size of one file; blocking, so it runs in a worker thread."""
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
        return digest, os.fstat(handle.fileno()).st_size


def _is_file_entry(path: Path) -> bool:
    """A regular file, or a link that does not lead to a folder.

    A link whose target is missing or cannot be reached stays a file of the folder: reading it then
    fails and is reported, where leaving it out would take its document for removed.
    """
    try:
        if path.is_symlink():
            return not path.is_dir()
        return path.is_file()
    except OSError:  # cannot even be looked at: the read fails and says why
        return True


def folder_files(root: Path, scope: Collection[str] | None = None, rules: IgnoreRules | None = None) -> list[str]:
    """Relative POSIX paths of the files under ``root`` the ignore rules keep (``rag_cli.ignores``),
    only under ``scope``'s paths if given.

    Links that lead nowhere are listed too (see :func:`_is_file_entry`)."""
    kept = FolderFilter(root, rules)
    found: set[str] = set()
    for relative in [""] if scope is None else scope:
        start = root / relative
        if relative and _is_file_entry(start):
            if kept.keeps(relative):
                found.add(relative)
        elif start.is_dir():
            found.update(kept.files(relative))
    return sorted(found)


def _list_folder(root: Path, scope: Collection[str] | None, rules: IgnoreRules) -> list[str]:
    if not root.is_dir():
        # A vanished root (an unmounted disk) must not read as "every file was removed".
        raise SyncAbortedError(f"{root} is not a folder any more")
    try:
        return folder_files(root, scope, rules)
    except UnreadableFolderError as exc:
        # Its files are not known: none may be taken as removed.
        raise SyncAbortedError(str(exc)) from exc


async def _scan_folder(
    source: FolderSource, scope: Collection[str] | None, rules: IgnoreRules, progress: Progress | None
) -> list[SourceEntry]:
    relatives = await asyncio.to_thread(_list_folder, source.root, scope, rules)
    task: TaskID | None = progress.add_task("", total=len(relatives), verb="hash") if progress else None
    gate = asyncio.Semaphore(HASH_WORKERS)

    async def one(relative: str) -> SourceEntry:
        path = source.root / relative
        async with gate:
            try:
                digest, size = await asyncio.to_thread(_digest, path)
            except OSError as exc:
                return SourceEntry(relative, error=f"cannot read file: {exc}")
            finally:
                if progress is not None and task is not None:
                    progress.update(task, advance=1, description=escape(relative))
        return SourceEntry(relative, content_hash=digest, size=size)

    return list(await asyncio.gather(*(one(relative) for relative in relatives)))


def _s3_endpoint(endpoint_url: str | None) -> tuple[str, str] | None:
    """Where the S3 endpoint comes from and its value, in the order the listing uses; None: AWS itself."""
    candidates = [("--s3-endpoint-url", endpoint_url)]
    candidates += [
        (name, os.environ.get(name)) for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT_URL")
    ]
    return next(((origin, value) for origin, value in candidates if value), None)


def check_s3_endpoint(endpoint_url: str | None) -> None:
    """A :class:`SourceError` naming the flag or variable when boto3 would refuse the endpoint URL."""
    from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url

    found = _s3_endpoint(endpoint_url)
    if found is None:
        return
    origin, value = found
    # The check boto3 makes when it builds the client (a bare ValueError there, mid-sync).
    if not (is_valid_endpoint_url(value) or is_valid_ipv6_endpoint_url(value)):
        raise SourceError(f"{origin} {value!r} is not a valid endpoint URL (http(s)://host[:port])")


def _s3_client(endpoint_url: str | None) -> S3Client:
    import boto3
    from botocore.config import Config

    # The standard AWS settings first (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_REGION, ~/.aws),
    # then the S3_* variables `rag dev` and the services read, so one shell serves both.
    standard_endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    endpoint = endpoint_url or (None if standard_endpoint else os.environ.get("S3_ENDPOINT_URL")) or None
    access = secret = None
    if not os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("S3_ACCESS_KEY_ID"):
        access, secret = os.environ.get("S3_ACCESS_KEY_ID"), os.environ.get("S3_SECRET_ACCESS_KEY")
    session = boto3.session.Session()
    config = Config(
        region_name=session.region_name or os.environ.get("S3_REGION") or "us-east-1",
        connect_timeout=10,
        read_timeout=60,
        retries={"max_attempts": 3, "mode": "standard"},
        s3={"addressing_style": "path"},  # what MinIO needs, as the ingestion service does
        signature_version="s3v4",
    )
    client: S3Client = session.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=access, aws_secret_access_key=secret, config=config
    )
    return client


def list_s3_objects(source: S3Source, endpoint_url: str | None) -> list[SourceEntry]:
    """Every object under the prefix (blocking: call it in a worker thread)."""
    from botocore.exceptions import BotoCoreError, ClientError

    entries: list[SourceEntry] = []
    prefix = source.key_prefix
    try:
        client = _s3_client(endpoint_url)
        try:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=source.bucket, Prefix=prefix):
                if "KeyCount" not in page:
                    # Not S3 (a web page answering 200 parses as an empty page): that must not read as
                    # "every object was removed".
                    raise SyncAbortedError(
                        f"cannot list {source.uri}: the endpoint did not answer with an S3 object listing"
                    )
                for item in page.get("Contents", []):
                    key = item.get("Key", "")
                    relative = key[len(prefix) :]
                    if not relative or key.endswith("/") or is_hidden(relative):
                        continue  # folder markers and hidden names
                    entries.append(SourceEntry(relative, s3_key=key, s3_etag=item.get("ETag"), size=item.get("Size")))
        finally:
            client.close()
    except ClientError as exc:
        error: Any = exc.response.get("Error", {})
        raise SyncAbortedError(
            f"cannot list {source.uri}: {error.get('Code', 'unknown')} {error.get('Message', '')}".strip()
        ) from exc
    except BotoCoreError as exc:
        raise SyncAbortedError(f"cannot list {source.uri}: {exc}") from exc
    return entries


async def scan_source(
    source: Source, options: SyncOptions, scope: Collection[str] | None = None, progress: Progress | None = None
) -> list[SourceEntry]:
    """The source's files as the plan compares them (``scope``: only these relative paths, folders only)."""
    if isinstance(source, FolderSource):
        return await _scan_folder(source, scope, options.ignore_rules, progress)
    return await asyncio.to_thread(list_s3_objects, source, options.s3_endpoint_url)
