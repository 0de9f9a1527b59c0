"""Signed citation links: what the retrieval agent puts on a cited passage and the ingestion service
opens without a Bearer key (a browser following a citation has none).

A link names one passage of one document of one tenant: the tenant, the file, the bytes of the
original it was cut from (``source_hash``), the page and the chunk's point id, and when the link
expires. The token is ``<payload>.<signature>``: the payload is that record as compact JSON in
URL-safe base64, the signature HMAC-SHA256 over the payload under CITATION_SIGNING_KEY. Changing any
character changes the payload or the signature, so a tampered or forged link (another tenant's
document, another page) fails :func:`verify_link`, as does one past its expiry.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from shared_contract.errors import ContractError
from shared_contract.schema import MetaKey

# Paths of the ingestion service's citation routes, under its base URL.
CITATIONS_PATH = "/api/v1/citations"
PAGE_IMAGE_SUFFIX = "page.png"
ORIGINAL_SUFFIX = "original"
_SIGNATURE_BYTES = 32
# A token longer than this is refused before any decoding (the longest real one is a few hundred).
MAX_TOKEN_CHARS = 4096


# Originals the ingestion service renders pages of (``meta.format``); an image is one page.
PAGED_FORMATS = frozenset({"pdf"})
IMAGE_FORMATS = frozenset({"png", "jpg", "jpeg", "jpe", "tif", "tiff", "webp", "bmp", "gif"})
# ``meta.geometry`` of a chunk placed on a PDF rendering of its office document (Gotenberg): its
# page is its regions' page, shown from the rendering kept beside the original.
RENDERED_GEOMETRY = "rendering"


class CitationLinkError(ContractError):
    """A citation link that does not verify: malformed, tampered with, signed under another key, or expired."""

    def __init__(self, message: str, *, expired: bool = False) -> None:
        super().__init__(message)
        self.expired = expired


@dataclass(frozen=True)
class PageLink:
    """What a signed link grants: one passage's page of one original, until ``expires_at`` (Unix seconds)."""

    collection_name: str
    file_id: str
    source_hash: str
    page: int
    point_id: str
    expires_at: int


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(payload: str, key: bytes) -> bytes:
    return hmac.new(key, payload.encode("ascii"), hashlib.sha256).digest()


def sign_link(link: PageLink, key: bytes) -> str:
    """The token of ``link`` under ``key``."""
    payload = _encode(json.dumps(asdict(link), separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    return f"{payload}.{_encode(_signature(payload, key))}"


def _field(record: dict[str, Any], name: str, kind: type) -> Any:
    value = record.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise CitationLinkError(f"the link's {name} is missing or malformed")
    return value


def verify_link(token: str, key: bytes, *, now: float | None = None) -> PageLink:
    """The link ``token`` grants; CitationLinkError when it is malformed, not signed with ``key``, or expired.

    The signature is checked (in constant time) before the payload is read.
    """
    if len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
        raise CitationLinkError("the link is malformed")
    payload, signature = token.split(".")
    try:
        given = _decode(signature)
        record = json.loads(_decode(payload)) if hmac.compare_digest(given, _signature(payload, key)) else None
    except (binascii.Error, ValueError) as exc:
        raise CitationLinkError("the link is malformed") from exc
    if len(given) != _SIGNATURE_BYTES or record is None:
        raise CitationLinkError("the link's signature does not match")
    if not isinstance(record, dict):
        raise CitationLinkError("the link is malformed")
    link = PageLink(
        collection_name=_field(record, "collection_name", str),
        file_id=_field(record, "file_id", str),
        source_hash=_field(record, "source_hash", str),
        page=_field(record, "page", int),
        point_id=_field(record, "point_id", str),
        expires_at=_field(record, "expires_at", int),
    )
    if link.expires_at <= (time.time() if now is None else now):
        raise CitationLinkError("the link has expired", expired=True)
    return link


def _text(meta: dict[str, Any], key: str) -> str | None:
    value = meta.get(key)
    return value if isinstance(value, str) and value else None


def cited_page(meta: dict[str, Any]) -> int | None:
    """The 0-based page a chunk's link opens, None when its original has no page to show (not a PDF, an
    image or an office document placed on its rendering, or stored without its source hash)."""
    if _text(meta, MetaKey.SOURCE_HASH) is None:
        return None
    if meta.get(MetaKey.GEOMETRY) == RENDERED_GEOMETRY:
        regions = meta.get(MetaKey.REGIONS)
        first = regions[0] if isinstance(regions, list) and regions and isinstance(regions[0], dict) else {}
        rendered_page = first.get("page")
        return rendered_page if isinstance(rendered_page, int) and not isinstance(rendered_page, bool) else None
    fmt = _text(meta, MetaKey.FORMAT)
    page = meta.get(MetaKey.PAGE)
    page = page if isinstance(page, int) and not isinstance(page, bool) and page >= 0 else None
    if fmt in PAGED_FORMATS:
        return page
    if fmt in IMAGE_FORMATS:
        return page if page is not None else 0
    return None


def link_for(meta: dict[str, Any], point_id: str, *, expires_at: int) -> PageLink | None:
    """The link of a stored chunk (its payload ``meta`` and point id), None when it is not citable."""
    page = cited_page(meta)
    collection_name, file_id = _text(meta, MetaKey.COLLECTION_NAME), _text(meta, MetaKey.FILE_ID)
    source_hash = _text(meta, MetaKey.SOURCE_HASH)
    if page is None or collection_name is None or file_id is None or source_hash is None:
        return None
    return PageLink(collection_name, file_id, source_hash, page, point_id, expires_at)


def page_image_url(base_url: str, token: str) -> str:
    """The PNG of the cited page with the passage highlighted."""
    return f"{base_url.rstrip('/')}{CITATIONS_PATH}/{token}/{PAGE_IMAGE_SUFFIX}"


def original_url(base_url: str, token: str, page: int) -> str:
    """The original document, opened at the cited page (``#page=`` counts from 1, as PDF viewers do)."""
    return f"{base_url.rstrip('/')}{CITATIONS_PATH}/{token}/{ORIGINAL_SUFFIX}#page={page + 1}"
