"""POST /search with citation links (issue 50): each passage of a PDF carries signed links to its
highlighted page and to its original; nothing else does, and nothing does unless links are configured."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore, point_id_for
from shared_contract.citations import CitationLinkError, PageLink, verify_link

from ...citation_support import (  # noqa: TID252
    BASE_URL,
    HANDBOOK_CHUNKS,
    HANDBOOK_FILE_ID,
    HANDBOOK_HASH,
    HANDBOOK_NAME,
    HANDBOOK_TENANT,
    KEY,
    LEAVE_QUESTION,
    LINKS_ON,
    MEMO_NAME,
    MEMO_TEXT,
    NOW,
    SIGNING_KEY,
    TTL_SECONDS,
    add_handbook,
    clock,
    original_link,
    page_image_token,
)
from ...conftest import AUTH, make_settings  # noqa: TID252

Search = Callable[..., list[tuple[str, dict[str, Any]]]]


@pytest.fixture
def library(seeded: ChunkStore, embedder: ContractEmbedder) -> ChunkStore:
    anyio.run(add_handbook, seeded, embedder)
    return seeded


@pytest.fixture
def search(app_factory: Callable[..., TestClient], library: ChunkStore) -> Search:
    """``search(question, **settings)``: the (text, metadata) pairs of a /search over kb-a."""

    def run(question: str, **overrides: Any) -> list[tuple[str, dict[str, Any]]]:
        client = app_factory(make_settings(**overrides), library, clock=clock)
        response = client.post(
            "/search", json={"queries": [question], "collection_names": [HANDBOOK_TENANT], "k": 8}, headers=AUTH
        )
        assert response.status_code == 200, response.text
        data = response.json()
        return list(zip(data["documents"][0], data["metadatas"][0], strict=True))

    return run


def passage_of(hits: list[tuple[str, dict[str, Any]]], text: str) -> dict[str, Any]:
    return next(meta for document, meta in hits if text in document)


def test_a_pdf_passage_carries_a_signed_link_to_its_highlighted_page_and_its_original(search: Search) -> None:
    chunk_id, page, text = HANDBOOK_CHUNKS[0]
    meta = passage_of(search(LEAVE_QUESTION, **LINKS_ON), text)
    token = page_image_token(meta["citation_url"])
    assert verify_link(token, KEY, now=NOW) == PageLink(
        collection_name=HANDBOOK_TENANT,
        file_id=HANDBOOK_FILE_ID,
        source_hash=HANDBOOK_HASH,
        page=page,
        point_id=point_id_for(chunk_id),
        expires_at=int(NOW) + TTL_SECONDS,
    )
    assert meta["original_url"] == original_link(token, page)
    assert meta["original_url"].endswith(f"#page={page + 1}")
    # Where the Open WebUI fork's citation modal reads a passage's own link.
    assert meta["data"] == {"url": meta["citation_url"]}
    # Signed with CITATION_SIGNING_KEY: another key does not open it.
    with pytest.raises(CitationLinkError):
        verify_link(token, b"another-key-0123456789-0123456789-01", now=NOW)


def test_the_links_expire_ttl_seconds_after_the_search(search: Search) -> None:
    meta = passage_of(search(LEAVE_QUESTION, **LINKS_ON), HANDBOOK_CHUNKS[0][2])
    token = page_image_token(meta["citation_url"])
    verify_link(token, KEY, now=NOW + TTL_SECONDS - 1)
    with pytest.raises(CitationLinkError) as caught:
        verify_link(token, KEY, now=NOW + TTL_SECONDS)
    assert caught.value.expired


def test_only_passages_with_a_page_to_show_have_links(search: Search) -> None:
    hits = search("paid vacation leave", **LINKS_ON, search_window_chars=0)
    names = {meta["name"] for _, meta in hits}
    assert {HANDBOOK_NAME, MEMO_NAME} <= names
    linked = {meta["name"] for _, meta in hits if "citation_url" in meta}
    # The docx has no page; the corpus's chunks were stored without a format or source hash.
    assert linked == {HANDBOOK_NAME}
    memo = passage_of(hits, MEMO_TEXT)
    assert "original_url" not in memo
    # Each of the PDF's passages names its own chunk and page.
    for chunk_id, page, text in HANDBOOK_CHUNKS:
        link = verify_link(page_image_token(passage_of(hits, text)["citation_url"]), KEY, now=NOW)
        assert (link.point_id, link.page) == (point_id_for(chunk_id), page)


def test_links_are_added_after_the_metadata_fields_filter(search: Search) -> None:
    meta = passage_of(search(LEAVE_QUESTION, **LINKS_ON, search_metadata_fields="name,page"), HANDBOOK_CHUNKS[0][2])
    assert set(meta) == {"name", "page", "citation_url", "original_url", "data"}


@pytest.mark.parametrize(
    "overrides",
    [
        {"citation_signing_key": SIGNING_KEY},
        {"citation_base_url": BASE_URL},
        {},
    ],
    ids=["without-base-url", "without-key", "neither"],
)
def test_no_links_unless_both_the_key_and_the_base_url_are_set(search: Search, overrides: dict[str, Any]) -> None:
    hits = search(LEAVE_QUESTION, **overrides)
    meta = passage_of(hits, HANDBOOK_CHUNKS[0][2])
    assert meta["name"] == HANDBOOK_NAME
    assert not any({"citation_url", "original_url", "data"} & set(meta) for _, meta in hits)


def test_the_openapi_documents_the_two_link_keys(api: TestClient) -> None:
    schema = api.get("/openapi.json").json()["components"]["schemas"]["SearchResponse"]
    description = schema["properties"]["metadatas"]["description"]
    assert "citation_url" in description
    assert "original_url" in description
    assert "data.url" in description
