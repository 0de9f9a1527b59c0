"""The one way to read every point a filter selects: page after page of the port's ``scroll``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from qdrant_client import models

from rag_runtime.store.port import ChunkStore, PointRecord


async def scroll_pages(
    store: ChunkStore,
    selector: models.Filter | None,
    *,
    page_size: int,
    with_payload: bool | Sequence[str] = True,
    with_vectors: bool = False,
) -> AsyncIterator[list[PointRecord]]:
    """Each page of the points ``selector`` matches, in id order, until the last; a caller that
    stops early reads no further page."""
    offset: str | None = None
    while True:
        page, offset = await store.scroll(
            selector, limit=page_size, offset=offset, with_payload=with_payload, with_vectors=with_vectors
        )
        if page:
            yield page
        if offset is None:
            return
