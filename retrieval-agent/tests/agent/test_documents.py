"""read_document (whole documents rebuilt from their chunks) and list_documents, on a real embedded store."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import date
from typing import Any

import anyio
import pytest

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore, chunk_point
from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.agent.documents import (
    TRUNCATION_MARK,
    cut,
    list_document_entries,
    read_whole_document,
)
from retrieval_agent.agent.filters import DocumentFilters, filter_conditions, ingested_on, seq_at
from retrieval_agent.search.queries import ChatMessage

from ..conftest import chunk_meta, create_collection, make_settings  # noqa: TID252
from .agent_support import Script, agent_settings, agentic, call, say, tool_returns  # noqa: TID252

HANDBOOK = (
    "# Staff handbook\n\nNew employees receive a laptop on their first day. The IT desk on the second floor "
    "sets up accounts for email, calendar and the document archive. Holiday requests go to your manager at "
    "least three weeks ahead through the HR portal. The canteen opens at eleven thirty and closes at one "
    "thirty. Bicycles are parked in the basement, never in the corridors. Fire drills happen twice a year and "
    "everyone leaves by the nearest stairway, not the lift. Expense reports are filed within thirty days with "
    "receipts attached. The annual staff party is held in December at the harbour hall."
)
OLD_SEQ = seq_at(date(2024, 1, 10)) + 7
NEW_SEQ = seq_at(date(2025, 3, 1)) + 3


def windows(text: str, size: int, overlap: int) -> list[str]:
    """Word windows sharing ``overlap`` words, as the token splitter cuts them (stripped, word-aligned)."""
    words = text.split(" ")
    pieces: list[str] = []
    start = 0
    while start < len(words):
        pieces.append(" ".join(words[start : start + size]).strip())
        if start + size >= len(words):
            break
        start += size - overlap
    return pieces


async def seed_documents(store: ChunkStore, embedder: ContractEmbedder) -> list[str]:
    settings = make_settings()
    await create_collection(store, settings)
    chunks = windows(HANDBOOK, 22, 6)
    rows: list[tuple[str, str, dict[str, Any]]] = []
    for split, text in enumerate(chunks):
        meta = chunk_meta("kb-a", "handbook.md", split, split, ingest_seq=NEW_SEQ, ingest_version="v2")
        meta["file_id"] = "file-handbook"
        rows.append((f"hb-{split}", text, meta))
        # An older version still live for a moment, and the same file in another tenant.
        old = chunk_meta("kb-a", "handbook.md", split, split, ingest_seq=OLD_SEQ, ingest_version="v1")
        old["file_id"] = "file-handbook"
        rows.append((f"hb-old-{split}", "OLD " + text, old))
        other = chunk_meta("kb-b", "handbook.md", split, split, ingest_seq=NEW_SEQ)
        other["file_id"] = "file-handbook"
        rows.append((f"hb-b-{split}", "TENANT B " + text, other))
    danish = chunk_meta("kb-a", "noter.txt", 0, 0, ingest_seq=OLD_SEQ, languages=["da"])
    danish["file_id"] = "file-noter"
    rows.append(("noter-0", "Kantinen åbner klokken halv tolv.", danish))
    pending = chunk_meta("kb-a", "draft.txt", 0, 0, ingest_seq=NEW_SEQ + 1, ingest_state="pending")
    pending["file_id"] = "file-draft"
    rows.append(("draft-0", "A draft still being written.", pending))
    random.Random(7).shuffle(rows)  # point ids, not insertion order, decide the scroll order anyway
    vectors = embedder.embed_documents([text for _, text, _ in rows], with_sparse=True)
    assert vectors.sparse is not None
    await store.upsert(
        [
            chunk_point(chunk_id, text, meta, dense=vectors.dense[index], sparse=vectors.sparse[index])
            for index, (chunk_id, text, meta) in enumerate(rows)
        ]
    )
    return chunks


@pytest.fixture
def documents_store(store_factory: Callable[..., ChunkStore], embedder: ContractEmbedder) -> ChunkStore:
    store = store_factory()
    anyio.run(lambda: seed_documents(store, embedder))
    return store


def test_cut_marks_the_truncation() -> None:
    text, truncated = cut("word " * 100, 60)
    assert truncated
    assert text.endswith(TRUNCATION_MARK)
    assert len(text) <= 60
    assert cut("short", 60) == ("short", False)


def test_a_document_is_rebuilt_in_order_from_the_newest_version_in_the_tenants(
    documents_store: ChunkStore,
) -> None:
    store = StoreSearch(documents_store, make_settings())
    document = anyio.run(lambda: read_whole_document(store, "file-handbook", ["kb-a"], max_chars=10_000))
    assert document is not None
    assert document.text == HANDBOOK
    assert document.collection_name == "kb-a"
    assert document.meta["name"] == "handbook.md"
    assert "page" not in document.meta
    assert "split_id" not in document.meta
    assert document.chunks == document.chunks_read == len(windows(HANDBOOK, 22, 6))
    assert not document.truncated
    # The other tenant's copy is read only when that tenant is asked for.
    other = anyio.run(lambda: read_whole_document(store, "file-handbook", ["kb-b"], max_chars=10_000))
    assert other is not None
    assert other.text.startswith("TENANT B")
    assert anyio.run(lambda: read_whole_document(store, "file-draft", ["kb-a"], max_chars=10_000)) is None
    assert anyio.run(lambda: read_whole_document(store, "file-noter", ["kb-b"], max_chars=10_000)) is None


def test_a_document_is_cut_at_the_budget(documents_store: ChunkStore) -> None:
    store = StoreSearch(documents_store, make_settings())
    document = anyio.run(lambda: read_whole_document(store, "file-handbook", ["kb-a"], max_chars=500))
    assert document is not None
    assert document.truncated
    assert len(document.text) <= 500
    assert HANDBOOK.startswith(document.text.removesuffix(TRUNCATION_MARK))


def test_long_documents_are_read_page_by_page(
    store_factory: Callable[..., ChunkStore], embedder: ContractEmbedder
) -> None:
    store = store_factory()

    async def seed() -> None:
        await create_collection(store, make_settings())
        texts = [f"Paragraph number {index} of the long manual." for index in range(150)]
        vectors = embedder.embed_documents(texts, with_sparse=False)
        points = []
        for index, text in enumerate(texts):
            meta = chunk_meta("kb-a", "manual.txt", 0, index)
            points.append(chunk_point(f"m-{index}", text, meta, dense=vectors.dense[index], sparse=None))
        await store.upsert(points)

    anyio.run(seed)
    search_store = StoreSearch(store, make_settings())
    document = anyio.run(lambda: read_whole_document(search_store, "file-manual.txt", ["kb-a"], max_chars=200_000))
    assert document is not None
    assert document.chunks_read == 150
    paragraphs = document.text.split("\n\n")
    assert paragraphs[0] == "Paragraph number 0 of the long manual."
    assert paragraphs[-1] == "Paragraph number 149 of the long manual."


def test_listing_filters_and_recency(documents_store: ChunkStore) -> None:
    store = StoreSearch(documents_store, make_settings())
    entries, capped = anyio.run(lambda: list_document_entries(store, ["kb-a"], []))
    assert not capped
    assert [entry.file_id for entry in entries] == ["file-handbook", "file-noter"]  # by name; draft is pending
    assert entries[0].seq == NEW_SEQ  # the newest version's entry
    danish = filter_conditions(DocumentFilters(languages=["DA"]))
    entries, _ = anyio.run(lambda: list_document_entries(store, ["kb-a"], danish))
    assert [entry.file_id for entry in entries] == ["file-noter"]
    recent = filter_conditions(DocumentFilters(ingested_after=date(2025, 1, 1)))
    entries, _ = anyio.run(lambda: list_document_entries(store, ["kb-a"], recent))
    assert [entry.file_id for entry in entries] == ["file-handbook"]
    before = filter_conditions(DocumentFilters(ingested_before=date(2024, 1, 10)))
    entries, _ = anyio.run(lambda: list_document_entries(store, ["kb-a"], before))
    # The handbook's older version (still live in this store) was added before that date too.
    assert [(entry.file_id, entry.seq) for entry in entries] == [("file-handbook", OLD_SEQ), ("file-noter", OLD_SEQ)]
    assert ingested_on(OLD_SEQ) == date(2024, 1, 10)


def test_read_document_is_a_source_in_the_response(documents_store: ChunkStore, embedder: ContractEmbedder) -> None:
    script = Script(
        [
            lambda _: call("retrieve", queries=["canteen opening hours"]),
            lambda messages: call("read_document", file_id=tool_returns(messages)[0]["results"][0]["file_id"]),
            lambda _: say("DONE"),
        ]
    )
    search = agentic(agent_settings(), documents_store, embedder, script.model())
    result = anyio.run(
        lambda: search.run(
            queries=None,
            messages=[ChatMessage(role="user", content="Summarise the staff handbook")],
            collection_names=["kb-a"],
            k=5,
        )
    )
    hits = result.result_sets[0]
    assert hits[0].content == HANDBOOK
    assert hits[0].meta["name"] == "handbook.md"
    assert hits[0].meta["file_id"] == "file-handbook"
    # Its chunks are inside it: not repeated as separate sources.
    assert not any(hit.content in HANDBOOK for hit in hits[1:])
    assert hits[0].relevance > 0
    seen = tool_returns(script.seen[-1])[1]
    assert seen["found"] is True
    assert seen["name"] == "handbook.md"
    assert len(seen["preview"]) <= 1000  # AGENT_TOOL_PREVIEW_CHARS x AGENT_PREVIEW_K


def test_list_then_read_a_document_never_retrieved(documents_store: ChunkStore, embedder: ContractEmbedder) -> None:
    script = Script(
        [
            lambda _: call("list_documents", recent=True, limit=1),
            lambda messages: call("read_document", file_id=tool_returns(messages)[0]["documents"][0]["file_id"]),
            lambda _: say("DONE"),
        ]
    )
    search = agentic(agent_settings(), documents_store, embedder, script.model())
    result = anyio.run(
        lambda: search.run(queries=["the newest document"], messages=None, collection_names=["kb-a"], k=3)
    )
    listing = tool_returns(script.seen[-1])[0]
    assert listing["order"] == "newest first"
    assert listing["documents"] == [
        {"file_id": "file-handbook", "name": "handbook.md", "languages": ["en"], "ingested": "2025-03-01"}
    ]
    assert result.outcome == "answered"
    assert [hit.content for hit in result.result_sets[0]] == [HANDBOOK]
    assert 0 < result.result_sets[0][0].relevance <= 1
