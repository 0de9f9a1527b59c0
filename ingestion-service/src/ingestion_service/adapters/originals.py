"""Where ingested originals are kept: a local directory (the embedded default) or an S3 bucket.

An original is stored under its tenant, its file and the sha256 of its bytes:
``<tenant>/<file>/<sha256>``, where tenant and file are the sha256 of their names (any name fits a
path segment or key, and nothing is guessed from one). Keyed by content, a re-sent identical file
writes nothing, and the versions of one file differ by key, so a new version is written beside the
live one and the old one removed once the new one is published (``indexing.originals``).

Synchronous (file system, boto3): call from a worker thread.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from ingestion_service.errors import OriginalStoreError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

logger = logging.getLogger(__name__)

_PART_SUFFIX = ".part"


def name_token(name: str) -> str:
    """A tenant's or file's name as a path segment: its sha256, hex."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class OriginalKey:
    """One stored original: a version (``sha256``) of one file of one tenant, or what is kept with it
    (``variant``, a suffix such as ``.rendering.pdf``)."""

    collection_name: str
    file_id: str
    sha256: str
    variant: str = ""

    @property
    def parts(self) -> tuple[str, str, str]:
        """The key's segments: tenant, file, content (and variant)."""
        return name_token(self.collection_name), name_token(self.file_id), self.sha256 + self.variant


def version_of(name: str) -> str:
    """The sha256 a stored name belongs to (a variant's too)."""
    return name.split(".", 1)[0]


def is_original(name: str) -> bool:
    """Whether a stored name is an original itself, not a variant kept with one."""
    return "." not in name


@dataclass(frozen=True)
class Usage:
    """What a tenant's (or the whole store's) originals hold."""

    originals: int
    bytes: int


class OriginalStore(Protocol):
    """The blob store's port: put, read, prune, delete, count."""

    def exists(self, key: OriginalKey) -> bool:
        """Whether ``key`` is stored."""

    def put(self, key: OriginalKey, source: Path) -> int:
        """Store ``source``'s bytes under ``key`` (atomically: readers see all of it or none); its size."""

    def fetch(self, key: OriginalKey, destination: Path) -> bool:
        """Copy the original into ``destination``; False when it is not stored."""

    def versions(self, collection_name: str, file_id: str) -> dict[str, int]:
        """What is stored of one file: name (a sha256, or a sha256 and a variant) -> size."""

    def remove(self, collection_name: str, file_id: str, sha256: str) -> int:
        """Remove one stored name (``versions``); the bytes freed (0 when it was not stored)."""

    def remove_everywhere(self, file_id: str) -> int:
        """Remove the file's originals in every tenant; the bytes freed."""

    def usage(self, collection_name: str | None = None) -> Usage:
        """The originals of one tenant, or of the whole store (variants count in bytes, not in originals)."""


class LocalOriginals:
    """Originals in a directory tree under ``root`` (ORIGINALS_DIR)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: OriginalKey) -> Path:
        tenant, file, sha256 = key.parts
        return self.root / tenant / file / sha256

    def _file_dir(self, collection_name: str, file_id: str) -> Path:
        return self.root / name_token(collection_name) / name_token(file_id)

    def exists(self, key: OriginalKey) -> bool:
        """Whether ``key`` is stored."""
        return self._path(key).is_file()

    def put(self, key: OriginalKey, source: Path) -> int:
        """Copy into a temporary file beside the target, then rename it over (atomic on one file system)."""
        target = self._path(key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            # A name of its own for every writer, in any process: the rename is the only shared step.
            descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=f"{target.name}.", suffix=_PART_SUFFIX)
            os.close(descriptor)
            temporary = Path(name)
            try:
                shutil.copyfile(source, temporary)
                os.replace(temporary, target)
            finally:
                temporary.unlink(missing_ok=True)
            return target.stat().st_size
        except OSError as exc:
            raise OriginalStoreError(f"keeping the original under {self.root} failed: {exc}") from exc

    def fetch(self, key: OriginalKey, destination: Path) -> bool:
        """Copy the original into ``destination``; False when it is not stored."""
        try:
            shutil.copyfile(self._path(key), destination)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise OriginalStoreError(f"reading the original under {self.root} failed: {exc}") from exc
        return True

    def versions(self, collection_name: str, file_id: str) -> dict[str, int]:
        """The stored versions of one file: sha256 -> size."""
        folder = self._file_dir(collection_name, file_id)
        try:
            return {
                entry.name: entry.stat().st_size
                for entry in folder.iterdir()
                if entry.is_file() and not entry.name.endswith(_PART_SUFFIX)
            }
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise OriginalStoreError(f"listing originals under {self.root} failed: {exc}") from exc

    def remove(self, collection_name: str, file_id: str, sha256: str) -> int:
        """Remove one version (and the file's folder once it is empty); the bytes freed."""
        path = self._file_dir(collection_name, file_id) / sha256
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise OriginalStoreError(f"removing an original under {self.root} failed: {exc}") from exc
        for folder in (path.parent, path.parent.parent):
            try:
                folder.rmdir()
            except OSError:
                break  # not empty (another version, another file, a writer's temporary file): kept
        return size

    def remove_everywhere(self, file_id: str) -> int:
        """Remove the file's originals in every tenant; the bytes freed."""
        freed = 0
        file = name_token(file_id)
        try:
            folders = [tenant / file for tenant in self.root.iterdir() if (tenant / file).is_dir()]
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise OriginalStoreError(f"listing originals under {self.root} failed: {exc}") from exc
        for folder in folders:
            for entry in list(folder.iterdir()):
                if entry.is_file() and not entry.name.endswith(_PART_SUFFIX):
                    freed += entry.stat().st_size
                    entry.unlink(missing_ok=True)
            for empty in (folder, folder.parent):
                try:
                    empty.rmdir()
                except OSError:
                    break
        return freed

    def usage(self, collection_name: str | None = None) -> Usage:
        """Walks the tenant's folder (or the root)."""
        top = self.root if collection_name is None else self.root / name_token(collection_name)
        count = size = 0
        try:
            for folder, _dirs, files in os.walk(top):
                for name in files:
                    if not name.endswith(_PART_SUFFIX):
                        count += is_original(name)
                        size += (Path(folder) / name).stat().st_size
        except OSError as exc:
            raise OriginalStoreError(f"counting originals under {self.root} failed: {exc}") from exc
        return Usage(originals=count, bytes=size)


def _s3_failure(action: str, exc: Exception) -> OriginalStoreError:
    if isinstance(exc, ClientError):
        error: Any = exc.response.get("Error", {})
        return OriginalStoreError(f"{action} failed: {type(exc).__name__}: {error.get('Code', 'unknown')}")
    return OriginalStoreError(f"{action} failed: {type(exc).__name__}")


def _missing(exc: ClientError) -> bool:
    error: Any = exc.response.get("Error", {})
    return str(error.get("Code")) in {"404", "NoSuchKey", "NotFound"}


class S3Originals:
    """Originals as objects ``<prefix><tenant>/<file>/<sha256>`` in ORIGINALS_BUCKET (MinIO in compose)."""

    def __init__(self, client: S3Client, bucket: str, prefix: str) -> None:
        self._client = client
        self.bucket = bucket
        self.prefix = prefix

    def _key(self, key: OriginalKey) -> str:
        return self.prefix + "/".join(key.parts)

    def _file_prefix(self, collection_name: str, file_id: str) -> str:
        return f"{self.prefix}{name_token(collection_name)}/{name_token(file_id)}/"

    def _list(self, prefix: str) -> dict[str, int]:
        found: dict[str, int] = {}
        try:
            for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    found[item.get("Key", "")] = int(item.get("Size", 0))
        except (ClientError, BotoCoreError) as exc:
            raise _s3_failure("listing originals", exc) from None  # not chained: botocore names the endpoint
        return found

    def exists(self, key: OriginalKey) -> bool:
        """head_object."""
        try:
            self._client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if _missing(exc):
                return False
            raise _s3_failure("looking up an original", exc) from None
        except BotoCoreError as exc:
            raise _s3_failure("looking up an original", exc) from None
        return True

    def put(self, key: OriginalKey, source: Path) -> int:
        """One upload (multipart above boto3's threshold); S3 makes the object visible whole or not at all."""
        try:
            self._client.upload_file(str(source), self.bucket, self._key(key))
        except (ClientError, BotoCoreError) as exc:
            raise _s3_failure("keeping the original", exc) from None
        return source.stat().st_size

    def fetch(self, key: OriginalKey, destination: Path) -> bool:
        """download_file; False when the object is gone."""
        try:
            self._client.download_file(self.bucket, self._key(key), str(destination))
        except ClientError as exc:
            destination.unlink(missing_ok=True)
            if _missing(exc):
                return False
            raise _s3_failure("reading the original", exc) from None
        except BotoCoreError as exc:
            destination.unlink(missing_ok=True)
            raise _s3_failure("reading the original", exc) from None
        return True

    def versions(self, collection_name: str, file_id: str) -> dict[str, int]:
        """The objects under the file's prefix."""
        prefix = self._file_prefix(collection_name, file_id)
        return {key[len(prefix) :]: size for key, size in self._list(prefix).items()}

    def remove(self, collection_name: str, file_id: str, sha256: str) -> int:
        """delete_object (idempotent); the bytes freed."""
        key = self._file_prefix(collection_name, file_id) + sha256
        listed = self._list(key)
        size = listed.get(key, 0)
        if key in listed:
            try:
                self._client.delete_object(Bucket=self.bucket, Key=key)
            except (ClientError, BotoCoreError) as exc:
                raise _s3_failure("removing an original", exc) from None
        return size

    def remove_everywhere(self, file_id: str) -> int:
        """Lists the whole store for the file's key segment: a rare call (DELETE without a collection)."""
        segment = f"/{name_token(file_id)}/"
        doomed = {key: size for key, size in self._list(self.prefix).items() if segment in key}
        for key in doomed:
            try:
                self._client.delete_object(Bucket=self.bucket, Key=key)
            except (ClientError, BotoCoreError) as exc:
                raise _s3_failure("removing an original", exc) from None
        return sum(doomed.values())

    def usage(self, collection_name: str | None = None) -> Usage:
        """Lists the tenant's prefix (or the store's)."""
        prefix = self.prefix if collection_name is None else f"{self.prefix}{name_token(collection_name)}/"
        sizes = self._list(prefix)
        return Usage(originals=sum(is_original(key.rsplit("/", 1)[-1]) for key in sizes), bytes=sum(sizes.values()))
