"""Signed links from a cited passage to its page (issue 50): the page as a PNG with the passage
highlighted, and the original opened at that page. The ingestion service serves both without a
Bearer key, because a browser following a citation has none; the token signed here
(``shared_contract.citations``) is what it checks instead.

Every surface that returns passages (``POST /search``, the chat's ``rag_sources`` and source events,
the MCP and OpenAPI tools) takes its links from one :class:`CitationLinks`, which the app builds once
from its settings.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from retrieval_agent.search.postprocess import Hit
from retrieval_agent.settings import Settings
from shared_contract.citations import link_for, original_url, page_image_url, sign_link

# Unix seconds now; tests pass a fixed one.
Clock = Callable[[], float]
# The keys a passage's /search metadata gets its links under; added to the returned metadata, never stored.
CITATION_URL_KEY = "citation_url"
ORIGINAL_URL_KEY = "original_url"
# The Open WebUI fork's citation modal shows a passage's ``metadata.data.url`` as its "Source" link
# (patch expose-file-metadata-url-in-citation-modal), one per passage.
FORK_LINK_KEY = "data"


@dataclass(frozen=True)
class CitationUrls:
    """A passage's two links, both signed with the same token."""

    page_image: str
    original: str


class CitationLinks:
    """Links signed under ``key`` to the ingestion service at ``base_url``, each opening for
    ``ttl_seconds`` from when it was made (by ``clock``)."""

    def __init__(self, key: bytes, base_url: str, *, ttl_seconds: int, clock: Clock = time.time) -> None:
        self._key = key
        self._base_url = base_url
        self._ttl_seconds = ttl_seconds
        self._clock = clock

    def for_hit(self, hit: Hit) -> CitationUrls | None:
        """The links of ``hit``; None when its original has no page to show (not a PDF or an image,
        stored without its source hash) or it is not one stored chunk."""
        if not _is_chunk(hit.point_id):
            return None
        link = link_for(hit.meta, hit.point_id, expires_at=int(self._clock()) + self._ttl_seconds)
        if link is None:
            return None
        token = sign_link(link, self._key)
        return CitationUrls(
            page_image=page_image_url(self._base_url, token), original=original_url(self._base_url, token, link.page)
        )


def with_links(meta: dict[str, Any], urls: CitationUrls | None) -> dict[str, Any]:
    """``meta`` (a copy) with ``citation_url``, ``original_url`` and the fork's ``data.url`` (the page
    image) when the passage has links."""
    if urls is None:
        return meta
    return {
        **meta,
        CITATION_URL_KEY: urls.page_image,
        ORIGINAL_URL_KEY: urls.original,
        FORK_LINK_KEY: {"url": urls.page_image},
    }


def citation_links(settings: Settings, *, clock: Clock = time.time) -> CitationLinks | None:
    """The app's links, None unless both CITATION_SIGNING_KEY and CITATION_BASE_URL are set."""
    key, base_url = settings.citation_key, settings.citation_base_url
    if key is None or base_url is None:
        return None
    return CitationLinks(key, base_url, ttl_seconds=settings.citation_link_ttl_seconds, clock=clock)


def _is_chunk(point_id: str) -> bool:
    # Stored chunks have UUID point ids; a whole document the agent read is "document:<tenant>:<file>",
    # with no one passage to highlight.
    try:
        uuid.UUID(point_id)
    except ValueError:
        return False
    return True
