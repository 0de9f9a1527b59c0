"""Citation links in the chat (issue 50): ``rag_sources`` carries each passage's links, and the source
events put the document's page image where Open WebUI 0.12.4 links a citation (``source.url``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore, point_id_for
from shared_contract.citations import verify_link

from ..citation_support import (  # noqa: TID252
    HANDBOOK_CHUNKS,
    HANDBOOK_FILE_ID,
    HANDBOOK_NAME,
    HANDBOOK_TENANT,
    KEY,
    LEAVE_QUESTION,
    LINKS_ON,
    NOW,
    TTL_SECONDS,
    add_handbook,
    clock,
    original_link,
    page_image_token,
)
from ..conftest import AUTH  # noqa: TID252
from ..scripted_llm import ScriptedLLM, text  # noqa: TID252
from .chat_support import chat_body, chat_settings, chunks, sse_events  # noqa: TID252

Chat = Callable[..., dict[str, Any] | list[dict[str, Any]]]


@pytest.fixture
def chat(
    serve: Callable[[Any], str], app_factory: Callable[..., TestClient], seeded: ChunkStore, embedder: ContractEmbedder
) -> Chat:
    """``chat(stream=..., **settings)``: a turn about leave over kb-a (the whole body, or the stream's chunks)."""
    anyio.run(add_handbook, seeded, embedder)
    llm = ScriptedLLM(lambda body: text("Twenty-five days [1]."))
    base = serve(llm.app())

    def run(*, stream: bool = False, **overrides: Any) -> dict[str, Any] | list[dict[str, Any]]:
        settings = chat_settings(f"{base}/v1", chat_context_k=4, search_window_chars=0, **overrides)
        client = app_factory(settings, seeded, clock=clock)
        body = chat_body(
            f"scripted@{HANDBOOK_TENANT}", stream=stream, messages=[{"role": "user", "content": LEAVE_QUESTION}]
        )
        response = client.post("/v1/chat/completions", json=body, headers=AUTH)
        assert response.status_code == 200, response.text
        if stream:
            return chunks(sse_events(response.text))
        answer: dict[str, Any] = response.json()
        return answer

    return run


def source_events(parsed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [chunk["event"]["data"] for chunk in parsed if "event" in chunk]


def test_rag_sources_carry_each_passages_links(chat: Chat) -> None:
    answer = chat(**LINKS_ON)
    assert isinstance(answer, dict)
    sources = answer["rag_sources"]
    handbook = {source["text"]: source for source in sources if source["file_name"] == HANDBOOK_NAME}
    assert set(handbook) == {chunk_text for _, _, chunk_text in HANDBOOK_CHUNKS}
    for chunk_id, page, chunk_text in HANDBOOK_CHUNKS:
        source = handbook[chunk_text]
        token = page_image_token(source["citation_url"])
        link = verify_link(token, KEY, now=NOW)
        assert (link.collection_name, link.file_id, link.page) == (HANDBOOK_TENANT, HANDBOOK_FILE_ID, page)
        assert link.point_id == point_id_for(chunk_id)
        assert link.expires_at == int(NOW) + TTL_SECONDS
        assert source["original_url"] == original_link(token, page)
    # The corpus's chunks have no page to show.
    others = [source for source in sources if source["file_name"] != HANDBOOK_NAME]
    assert others
    assert all(source["citation_url"] is None and source["original_url"] is None for source in others)


def test_rag_sources_have_no_links_without_the_settings(chat: Chat) -> None:
    answer = chat()
    assert isinstance(answer, dict)
    assert answer["rag_sources"]
    assert all(source["citation_url"] is None for source in answer["rag_sources"])


def test_source_events_link_the_document_to_its_first_passages_highlighted_page(chat: Chat) -> None:
    parsed = chat(stream=True, **LINKS_ON)
    assert isinstance(parsed, list)
    sources = parsed[-1]["rag_sources"]
    events = source_events(parsed)
    handbook = next(event for event in events if event["source"]["name"] == HANDBOOK_NAME)
    passages = [source for source in sources if source["file_name"] == HANDBOOK_NAME]
    assert len(passages) == len(handbook["metadata"]) == 2
    # One link per citation in Open WebUI: the first passage's highlighted page.
    assert handbook["source"] == {"id": HANDBOOK_FILE_ID, "name": HANDBOOK_NAME, "url": passages[0]["citation_url"]}
    number = passages[0]["index"]
    for meta, source in zip(handbook["metadata"], passages, strict=True):
        # No file_id: Open WebUI would link its own file store instead of source.url.
        assert meta == {
            "source": HANDBOOK_FILE_ID,
            "name": HANDBOOK_NAME,
            "collection_name": HANDBOOK_TENANT,
            "page": source["page"],
            "citation": number,
            "citation_url": source["citation_url"],
            "original_url": source["original_url"],
            # The Open WebUI fork's modal shows this as the passage's own link.
            "data": {"url": source["citation_url"]},
        }
    # Documents without links keep their file_id and have no url.
    others = [event for event in events if event is not handbook]
    assert others
    for event in others:
        assert "url" not in event["source"]
        assert all("file_id" in meta and "citation_url" not in meta for meta in event["metadata"])


def test_source_events_are_unchanged_without_links(chat: Chat) -> None:
    parsed = chat(stream=True)
    assert isinstance(parsed, list)
    handbook = next(event for event in source_events(parsed) if event["source"]["name"] == HANDBOOK_NAME)
    assert handbook["source"] == {"id": HANDBOOK_FILE_ID, "name": HANDBOOK_NAME}
    assert all(meta["file_id"] == HANDBOOK_FILE_ID for meta in handbook["metadata"])
    assert all("citation_url" not in meta for meta in handbook["metadata"])
