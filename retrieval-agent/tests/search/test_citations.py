"""The citation links of one hit: which chunks get them, what they name, when they expire."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval_agent.search.citations import CitationLinks, citation_links, with_links
from retrieval_agent.search.postprocess import Hit
from shared_contract.citations import verify_link

from ..citation_support import BASE_URL, KEY, LINKS_ON, NOW, SIGNING_KEY, TTL_SECONDS, clock, page_image_token  # noqa: TID252
from ..conftest import make_settings  # noqa: TID252

POINT_ID = "6f1c3f0e-8a0c-5d3e-9d55-0a4f2b7f1c11"


def stored(**meta: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "collection_name": "kb-a",
        "file_id": "file-1",
        "source_sha256": "ef" * 32,
        "format": "pdf",
        "page": 3,
    }
    values.update(meta)
    return {key: value for key, value in values.items() if value is not None}


def links() -> CitationLinks:
    built = citation_links(make_settings(**LINKS_ON), clock=clock)
    assert built is not None
    return built


def test_a_pdf_chunk_links_its_page_until_the_ttl_has_passed() -> None:
    urls = links().for_hit(Hit(point_id=POINT_ID, content="text", meta=stored()))
    assert urls is not None
    link = verify_link(page_image_token(urls.page_image), KEY, now=NOW)
    assert (link.collection_name, link.file_id, link.page, link.point_id) == ("kb-a", "file-1", 3, POINT_ID)
    assert link.expires_at == int(NOW) + TTL_SECONDS
    assert urls.original.endswith("/original#page=4")


def test_each_link_is_dated_by_the_clock_when_it_is_made() -> None:
    now = [NOW]
    made = CitationLinks(KEY, BASE_URL, ttl_seconds=60, clock=lambda: now[0])
    hit = Hit(point_id=POINT_ID, content="text", meta=stored())
    first = made.for_hit(hit)
    now[0] += 100
    later = made.for_hit(hit)
    assert first is not None
    assert later is not None
    assert verify_link(page_image_token(first.page_image), KEY, now=NOW).expires_at == int(NOW) + 60
    assert verify_link(page_image_token(later.page_image), KEY, now=NOW).expires_at == int(NOW) + 160


def test_an_image_without_a_page_links_its_only_page() -> None:
    urls = links().for_hit(Hit(point_id=POINT_ID, content="text", meta=stored(format="png", page=None)))
    assert urls is not None
    assert verify_link(page_image_token(urls.page_image), KEY, now=NOW).page == 0


@pytest.mark.parametrize(
    "meta",
    [
        stored(format="docx", page=None),
        stored(format="html"),
        stored(source_sha256=None),
        stored(page=None),
        stored(collection_name=None),
    ],
    ids=["docx", "html", "no-source-hash", "pdf-without-page", "no-tenant"],
)
def test_a_chunk_with_no_page_to_show_has_no_links(meta: dict[str, Any]) -> None:
    assert links().for_hit(Hit(point_id=POINT_ID, content="text", meta=meta)) is None


def test_a_whole_document_the_agent_read_has_no_links() -> None:
    # No one passage to highlight: the agent's document hits are named document:<tenant>:<file>.
    hit = Hit(point_id="document:kb-a:file-1", content="the whole text", meta=stored())
    assert links().for_hit(hit) is None


@pytest.mark.parametrize(
    "overrides",
    [{"citation_signing_key": SIGNING_KEY}, {"citation_base_url": BASE_URL}, {}],
    ids=["without-base-url", "without-key", "neither"],
)
def test_no_links_unless_both_settings_are_set(overrides: dict[str, Any]) -> None:
    assert citation_links(make_settings(**overrides)) is None


def test_with_links_adds_the_links_to_a_copy() -> None:
    urls = links().for_hit(Hit(point_id=POINT_ID, content="text", meta=stored()))
    meta = {"name": "a.pdf"}
    linked = with_links(meta, urls)
    assert urls is not None
    assert linked == {
        "name": "a.pdf",
        "citation_url": urls.page_image,
        "original_url": urls.original,
        "data": {"url": urls.page_image},
    }
    assert meta == {"name": "a.pdf"}
    assert with_links(meta, None) == {"name": "a.pdf"}
