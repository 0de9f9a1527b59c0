"""What a signed citation link opens: the cited page as a PNG with the passage highlighted, or the
original itself (``shared_contract.citations`` makes and checks the links).

A link is honoured only while what it names is stored: the chunk (its point, committed, of that file
in that tenant) and the original it was cut from (the same sha256). A document replaced, reindexed
into new chunks or deleted since answers CITATION_GONE instead of another version's page.

Rendered pages are cached in memory (least recently used out first, 64 MiB in all),
keyed by the original's sha256, page, chunk and width: what a link shows never changes.
"""

from __future__ import annotations

import mimetypes
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread

from ingestion_service.adapters.originals import OriginalKey
from ingestion_service.documents.page_images import PageNotShownError, render_page
from ingestion_service.documents.renderings import RENDERING_SUFFIX
from ingestion_service.errors import CitationGoneError, CitationLinkRefusedError, CitationsDisabledError
from ingestion_service.runtime import ServiceRuntime
from shared_contract import MetaKey
from shared_contract.citations import RENDERED_GEOMETRY, CitationLinkError, PageLink, verify_link

CACHE_BYTES = 64 * 1024 * 1024
GONE = "The cited passage is no longer stored (the document was replaced, reindexed or deleted): search again."


@dataclass(frozen=True)
class CitedOriginal:
    """An original staged for a response: where it is, how it is served, and the request's directory."""

    path: Path
    media_type: str
    filename: str
    workdir: Path


class PageCache:
    """Rendered PNGs, least recently used out first, within ``max_bytes``."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, int, str, int], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int, str, int]) -> bytes | None:
        with self._lock:
            image = self._entries.get(key)
            if image is not None:
                self._entries.move_to_end(key)
            return image

    def put(self, key: tuple[str, int, str, int], image: bytes) -> None:
        if len(image) > self.max_bytes:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            self._bytes -= len(previous) if previous is not None else 0
            self._entries[key] = image
            self._bytes += len(image)
            while self._bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= len(dropped)


def _regions_on(meta: dict[str, Any], page: int) -> list[Sequence[float]]:
    boxes: list[Sequence[float]] = []
    for region in meta.get(MetaKey.REGIONS) or []:
        if isinstance(region, dict) and region.get("page") == page:
            boxes.extend(box for box in region.get("boxes") or [] if isinstance(box, list) and len(box) == 4)
    return boxes


class CitationPages:
    """Opens verified links against the store and the originals."""

    def __init__(self, runtime: ServiceRuntime, cache: PageCache | None = None) -> None:
        self._runtime = runtime
        self._cache = cache or PageCache()

    def verify(self, token: str) -> PageLink:
        """The link ``token`` grants, or CITATIONS_DISABLED / CITATION_LINK_INVALID."""
        key = self._runtime.settings.citation_key
        if key is None:
            raise CitationsDisabledError("CITATION_SIGNING_KEY is not set")
        try:
            return verify_link(token, key)
        except CitationLinkError as exc:
            raise CitationLinkRefusedError(f"The citation link is refused: {exc}.", expired=exc.expired) from exc

    async def _cited_chunk(self, link: PageLink) -> dict[str, Any]:
        meta = await self._runtime.index.committed_chunk(link.point_id, link.file_id, link.collection_name)
        if meta is None or meta.get(MetaKey.SOURCE_HASH) != link.source_hash:
            raise CitationGoneError(GONE)
        return meta

    async def _staged_original(self, link: PageLink, meta: dict[str, Any], *, rendering: bool = False) -> CitedOriginal:
        """The original (or its PDF rendering) copied into a new request directory (the caller removes it)."""
        originals = self._runtime.originals
        if originals is None:
            raise CitationGoneError("Originals are not kept on this service (KEEP_ORIGINALS=false).")
        fmt = "pdf" if rendering else str(meta.get(MetaKey.FORMAT) or "")
        workdir = await self._runtime.scratch.new_workdir()
        try:
            size = meta.get(MetaKey.SOURCE_BYTES)
            # A rendering is not counted in SOURCE_BYTES; its reservation is the staging area's check.
            self._runtime.scratch.reserve(workdir, size if isinstance(size, int) and not rendering else 0)
            path = workdir / f"original.{fmt or 'bin'}"
            variant = RENDERING_SUFFIX if rendering else ""
            key = OriginalKey(link.collection_name, link.file_id, link.source_hash, variant)
            if not await originals.fetch(key, path):
                raise CitationGoneError(GONE)
        except BaseException:
            await self._runtime.scratch.remove_workdir(workdir)
            raise
        name = meta.get(MetaKey.NAME)
        media_type = mimetypes.guess_type(f"x.{fmt}")[0] or "application/octet-stream"
        return CitedOriginal(path, media_type, name if isinstance(name, str) and name else path.name, workdir)

    async def page_image(self, link: PageLink, width: int) -> bytes:
        """The cited page as a PNG ``width`` pixels wide with the chunk's regions on it highlighted."""
        meta = await self._cited_chunk(link)
        cache_key = (link.source_hash, link.page, link.point_id, width)
        cached = self._cache.get(cache_key)
        if cached is not None:
            return cached
        # An office document's chunk sits on its PDF rendering's page.
        rendered = meta.get(MetaKey.GEOMETRY) == RENDERED_GEOMETRY
        original = await self._staged_original(link, meta, rendering=rendered)
        try:
            fmt = "pdf" if rendered else str(meta.get(MetaKey.FORMAT) or "")
            boxes = _regions_on(meta, link.page)
            image = await anyio.to_thread.run_sync(
                lambda: render_page(original.path, fmt, link.page, boxes, width=width)
            )
        except PageNotShownError as exc:
            raise CitationGoneError(f"The cited page cannot be shown: {exc}.") from exc
        finally:
            await self._runtime.scratch.remove_workdir(original.workdir)
        self._cache.put(cache_key, image)
        return image

    async def original(self, link: PageLink) -> CitedOriginal:
        """The original the passage was cut from, staged for the response (remove ``workdir`` after it)."""
        meta = await self._cited_chunk(link)
        return await self._staged_original(link, meta)
