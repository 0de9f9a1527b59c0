"""Signed citation links: what verifies, and every way a link is refused."""

from __future__ import annotations

import pytest

from shared_contract.citations import (
    CitationLinkError,
    PageLink,
    cited_page,
    link_for,
    original_url,
    page_image_url,
    sign_link,
    verify_link,
)

KEY = b"k" * 32
LINK = PageLink(
    collection_name="handbook",
    file_id="docs/guide.pdf",
    source_hash="ab" * 32,
    page=2,
    point_id="0b6f3c8e-8d2a-4b7e-9f00-1c2d3e4f5a6b",
    expires_at=2_000_000_000,
)


def test_a_signed_link_verifies_to_what_was_signed() -> None:
    assert verify_link(sign_link(LINK, KEY), KEY, now=1_900_000_000) == LINK


def test_an_expired_link_is_refused_as_expired() -> None:
    with pytest.raises(CitationLinkError) as raised:
        verify_link(sign_link(LINK, KEY), KEY, now=LINK.expires_at)
    assert raised.value.expired


def test_every_changed_character_is_refused() -> None:
    token = sign_link(LINK, KEY)
    for position in range(0, len(token), 7):
        changed = "A" if token[position] != "A" else "B"
        tampered = token[:position] + changed + token[position + 1 :]
        with pytest.raises(CitationLinkError) as raised:
            verify_link(tampered, KEY, now=1_900_000_000)
        assert not raised.value.expired


def test_a_link_forged_for_another_tenant_is_refused() -> None:
    token = sign_link(LINK, KEY)
    forged_payload = sign_link(PageLink(**{**LINK.__dict__, "collection_name": "other"}), KEY).split(".")[0]
    forged = f"{forged_payload}.{token.split('.')[1]}"
    with pytest.raises(CitationLinkError, match="signature"):
        verify_link(forged, KEY, now=1_900_000_000)


def test_a_link_signed_under_another_key_is_refused() -> None:
    with pytest.raises(CitationLinkError, match="signature"):
        verify_link(sign_link(LINK, b"x" * 32), KEY, now=1_900_000_000)


@pytest.mark.parametrize("token", ["", "no-dot", "a.b.c", "!!.??", "e30." + "A" * 43, "x" * 5000])
def test_a_malformed_token_is_refused(token: str) -> None:
    with pytest.raises(CitationLinkError):
        verify_link(token, KEY, now=1_900_000_000)


def test_the_urls_name_the_page_image_and_the_original_at_its_page() -> None:
    assert page_image_url("http://ingest:8001/", "t.s") == "http://ingest:8001/api/v1/citations/t.s/page.png"
    assert original_url("http://ingest:8001", "t.s", 2) == "http://ingest:8001/api/v1/citations/t.s/original#page=3"


def _meta(**changes: object) -> dict[str, object]:
    meta: dict[str, object] = {
        "collection_name": "handbook",
        "file_id": "guide.pdf",
        "source_sha256": "ab" * 32,
        "format": "pdf",
        "page": 2,
    }
    return {key: value for key, value in (meta | changes).items() if value is not None}


def test_a_pdf_chunk_links_to_its_page() -> None:
    link = link_for(_meta(), "p1", expires_at=5)
    assert link == PageLink("handbook", "guide.pdf", "ab" * 32, 2, "p1", 5)


def test_an_image_is_its_own_first_page() -> None:
    assert cited_page(_meta(format="png", page=None)) == 0


@pytest.mark.parametrize(
    "changes",
    [{"format": "docx"}, {"source_sha256": None}, {"page": None}, {"page": True}, {"collection_name": None}],
)
def test_a_chunk_without_a_page_to_show_gets_no_link(changes: dict[str, object]) -> None:
    assert link_for(_meta(**changes), "p1", expires_at=5) is None


def test_an_office_chunk_placed_on_its_rendering_links_to_the_rendered_page() -> None:
    meta = _meta(format="docx", page=None) | {"geometry": "rendering", "regions": [{"page": 4, "boxes": []}]}
    assert cited_page(meta) == 4
    assert cited_page(_meta(format="docx", page=None) | {"geometry": "none"}) is None
