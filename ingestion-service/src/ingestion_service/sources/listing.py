"""What a source holds now: its items, each with the URI its document is stored under."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

import anyio.to_thread

from ingestion_service.errors import S3FetchError, SourceUnreadableError
from ingestion_service.runtime import ServiceRuntime
from ingestion_service.sources.crawler import SiteCrawl, fetch_text_with
from ingestion_service.sources.model import SourceRecord
from ingestion_service.sources.uris import local_path, parse_s3


@dataclass(frozen=True)
class ListedItem:
    """One item: its URI, its path relative to the source's root (folders and prefixes), and where it is
    read from (a local file, an S3 key, or the URI itself)."""

    uri: str
    relative: str | None = None
    local: Path | None = None
    s3_key: str | None = None


def _hidden(relative: str) -> bool:
    return any(part.startswith(".") for part in relative.split("/"))


def _wanted(relative: str, include: list[str], exclude: list[str]) -> bool:
    if _hidden(relative):
        return False
    if include and not any(fnmatchcase(relative, pattern) for pattern in include):
        return False
    return not any(fnmatchcase(relative, pattern) for pattern in exclude)


def _folder_items(record: SourceRecord, max_items: int) -> list[ListedItem]:
    root = local_path(record.uri)
    if not root.is_dir():
        raise SourceUnreadableError("The source's folder is gone or unreadable on the server.")
    items: list[ListedItem] = []
    try:
        paths = sorted(path for path in root.rglob("*") if path.is_file())
    except OSError as exc:
        raise SourceUnreadableError("The source's folder could not be listed.", internal=str(exc)) from exc
    for path in paths:
        relative = path.relative_to(root).as_posix()
        if _wanted(relative, record.include, record.exclude):
            items.append(ListedItem(uri=f"{record.uri}/{relative}", relative=relative, local=path))
            if len(items) >= max_items:
                break
    return items


async def list_items(runtime: ServiceRuntime, record: SourceRecord, workdir: Path) -> list[ListedItem]:
    """The source's items now; SourceUnreadableError (or the fetcher's error) when it cannot be listed."""
    max_items = runtime.settings.source_max_items
    if record.kind == "folder":
        return await anyio.to_thread.run_sync(_folder_items, record, max_items)
    if record.kind == "file":
        path = local_path(record.uri)
        return [ListedItem(uri=record.uri, relative=PurePosixPath(path.name).as_posix(), local=path)]
    if record.kind == "url":
        return [ListedItem(uri=record.uri)]
    if record.kind == "s3":
        location = parse_s3(record.uri)
        try:
            keys = await anyio.to_thread.run_sync(
                lambda: runtime.s3.list_keys(location.bucket, location.key_prefix, max_keys=max_items)
            )
        except S3FetchError as exc:
            raise SourceUnreadableError("The source's S3 prefix could not be listed.", internal=str(exc)) from exc
        items: list[ListedItem] = []
        for key in keys:
            relative = key.removeprefix(location.key_prefix)
            if _wanted(relative, record.include, record.exclude):
                items.append(ListedItem(uri=f"{record.uri}/{relative}", relative=relative, s3_key=key))
        return items
    runtime.scratch.reserve(workdir, runtime.settings.url_fetch_max_bytes)
    crawl = SiteCrawl(
        fetch_text_with(runtime.urls, workdir), record.uri, max_pages=record.max_pages, max_depth=record.max_depth
    )
    pages = await crawl.pages()
    if not pages:
        raise SourceUnreadableError("The website listed no page this service may read.")
    return [ListedItem(uri=page) for page in pages]
