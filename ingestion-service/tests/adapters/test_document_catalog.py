"""DocumentCatalog on a real embedded store, seeded directly: versions, old data, limits, updates.

The documents API tests (tests/api/routes/test_documents_api.py) seed through the real ingest;
these cover the states an ingest leaves only for a moment (two committed versions between publish
and sweep, pending runs) and data written before contract 2.1.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ingestion_service.adapters.document_catalog import DocumentCatalog, DocumentChanges
from ingestion_service.errors import TooManyDocumentsError
from ingestion_service.settings import Settings
from rag_runtime.store import ChunkStore, bootstrap_collection, chunk_point, close_store, match, open_store
from shared_contract import LIVE_STATE, PENDING_STATE, load_settings

pytestmark = pytest.mark.anyio

DIM = 384
# ingest_seq is epoch milliseconds * 1000 + a tie-breaker (pipeline/versioning.py).
SEQ_2024 = int(datetime(2024, 1, 10, tzinfo=UTC).timestamp() * 1000) * 1000 + 7
SEQ_2025 = int(datetime(2025, 3, 1, tzinfo=UTC).timestamp() * 1000) * 1000 + 3


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ChunkStore]:
    settings = load_settings(
        Settings, api_key="k" * 40, qdrant_uri=None, qdrant_path=tmp_path, qdrant_index=f"c_{uuid.uuid4().hex[:8]}"
    )
    opened = open_store(settings)
    await bootstrap_collection(opened, settings)
    try:
        yield opened
    finally:
        await close_store(opened)


async def seed(
    store: ChunkStore,
    file_id: str,
    chunks: list[str],
    *,
    tenant: str = "kb-a",
    seq: int | None = SEQ_2025,
    state: str | None = LIVE_STATE,
    chunk_meta: list[dict[str, Any]] | None = None,
    **document_meta: Any,
) -> list[str]:
    """One version of a file: ``chunks`` in order, split_id 0..n-1, ``document_meta`` on every chunk
    and ``chunk_meta[i]`` (page, headers) on chunk i.

    Point ids are random, so scroll order (by id) is not split order.
    """
    ids: list[str] = []
    points = []
    for split_id, content in enumerate(chunks):
        meta: dict[str, Any] = {
            "file_id": file_id,
            "collection_name": tenant,
            "name": f"{file_id}.md",
            "split_id": split_id,
            **document_meta,
            **(chunk_meta[split_id] if chunk_meta is not None else {}),
        }
        if seq is not None:
            meta |= {"ingest_seq": seq, "ingest_version": f"{seq:020d}"}
        if state is not None:
            meta["ingest_state"] = state
        chunk_id = uuid.uuid4().hex
        ids.append(chunk_id)
        points.append(chunk_point(chunk_id, content, meta, dense=[1.0] + [0.0] * (DIM - 1), sparse=None))
    await store.upsert(points)
    return ids


def v21(chunks: list[str], **overrides: Any) -> dict[str, Any]:
    """The document-level keys contract 2.1 writes."""
    return {
        "chunk_count": len(chunks),
        "text_bytes": sum(len(chunk.encode()) for chunk in chunks),
        "source_sha256": "ab" * 32,
        "source_bytes": 1234,
        "format": "md",
        "languages": ["en"],
        "extractor": "kreuzberg",
        "tags": ["policy"],
        "category": "hr",
        "attributes": {"year": 2025},
        "indexed_at": "2025-03-01T10:00:00+00:00",
        **overrides,
    }


THREE = ["alpha beta gamma delta epsilon zeta", "epsilon zeta eta theta iota kappa", "iota kappa lambda mu nu"]


async def test_two_committed_versions_list_read_and_count_as_the_newest(store: ChunkStore) -> None:
    # Between publish and sweep both versions are live; the old one has more chunks and another name.
    await seed(store, "f", ["old " * 10] * 5, seq=SEQ_2024, **v21(["x"] * 5, source_sha256="00" * 32))
    await seed(store, "f", THREE, seq=SEQ_2025, **v21(THREE))
    catalog = DocumentCatalog(store)

    page = await catalog.list_documents("kb-a", limit=10)
    assert page.total == 1
    [entry] = page.documents
    assert (entry.ingest_version, entry.chunks, entry.content_hash) == (f"{SEQ_2025:020d}", 3, "ab" * 32)

    text = await catalog.read_text("f", "kb-a")
    assert text is not None
    assert text.chunks == 3
    assert "old" not in text.text

    stats = await catalog.stats("kb-a")
    assert stats.documents == 1
    assert stats.text_bytes == sum(len(chunk.encode()) for chunk in THREE)


async def test_read_text_orders_by_split_id_and_keeps_each_overlap_once(store: ChunkStore) -> None:
    words = [f"word{index:03d}" for index in range(60)]
    windows = [" ".join(words[start : start + 20]) for start in range(0, 60, 15)]  # 5 words shared
    await seed(store, "f", windows, **v21(windows))
    text = await DocumentCatalog(store).read_text("f", "kb-a")
    assert text is not None
    assert text.text == " ".join(words)
    assert text.name == "f.md"


async def test_read_text_keeps_chunks_that_repeat_and_pages_that_share_a_footer(store: ChunkStore) -> None:
    # Four scanned pages that OCR to the same sentence: four chunks, none of them a window overlap.
    blank = "This page is intentionally left blank for the archive."
    await seed(store, "scan", [blank] * 4, **v21([blank] * 4))
    # A running footer that also opens the next page: a window overlap if the two were one page.
    footer = "Harbour Office annual report 2024"
    pages = [f"Revenue grew by four percent. {footer}", f"{footer} Costs fell in every quarter."]
    await seed(store, "report", pages, chunk_meta=[{"page": 1, "headers": []}, {"page": 2, "headers": []}])
    catalog = DocumentCatalog(store)

    scan = await catalog.read_text("scan", "kb-a")
    assert scan is not None
    assert (scan.text, scan.chunks) == ("\n\n".join([blank] * 4), 4)
    report = await catalog.read_text("report", "kb-a")
    assert report is not None
    assert report.text == "\n\n".join(pages)


async def test_pending_runs_are_invisible(store: ChunkStore) -> None:
    await seed(store, "only-pending", THREE, state=PENDING_STATE, **v21(THREE))
    await seed(store, "f", THREE, seq=SEQ_2024, **v21(THREE, tags=["committed"]))
    await seed(store, "f", ["a newer run still writing"], seq=SEQ_2025, state=PENDING_STATE, **v21(["x"]))
    catalog = DocumentCatalog(store)

    page = await catalog.list_documents("kb-a", limit=10)
    assert [(doc.file_id, doc.tags, doc.chunks) for doc in page.documents] == [("f", ["committed"], 3)]
    assert await catalog.read_text("only-pending", "kb-a") is None
    assert await catalog.document("only-pending", "kb-a") is None
    text = await catalog.read_text("f", "kb-a")
    assert text is not None
    assert "newer run" not in text.text
    assert (await catalog.stats("kb-a")).chunks == 3


async def test_data_from_before_contract_2_1_gets_counted_chunks_and_a_time_from_its_seq(store: ChunkStore) -> None:
    await seed(store, "old", THREE, seq=SEQ_2024, languages=["da"])
    # Older still: no ingest_seq and no ingest_state (pre-2.0 points count as live).
    await seed(store, "older", THREE[:2], seq=None, state=None)
    catalog = DocumentCatalog(store)

    page = await catalog.list_documents("kb-a", limit=10)
    by_id = {doc.file_id: doc for doc in page.documents}
    old = by_id["old"]
    assert old.chunks == 3
    assert old.ingested_at == datetime(2024, 1, 10, tzinfo=UTC)
    assert (old.content_hash, old.text_bytes, old.format, old.category) == (None, None, None, None)
    assert (old.tags, old.attributes, old.languages) == ([], {}, ["da"])
    assert (by_id["older"].chunks, by_id["older"].ingested_at) == (2, None)
    # The unknown time sorts as the oldest.
    assert [doc.file_id for doc in page.documents] == ["old", "older"]

    stats = await catalog.stats("kb-a")
    assert (stats.documents, stats.chunks, stats.text_bytes, stats.formats) == (2, 5, 0, {})
    assert stats.languages == {"da": 1}
    assert stats.last_ingest == datetime(2024, 1, 10, tzinfo=UTC)


async def test_sort_orders_and_pages_with_ties_broken_by_file_id(store: ChunkStore) -> None:
    same_time = "2025-03-01T10:00:00+00:00"
    await seed(store, "b", ["b"], name="Zebra.md", **v21(["b"], indexed_at=same_time))
    await seed(store, "a", ["a"], name="zebra.md", **v21(["a"], indexed_at=same_time))
    await seed(store, "c", ["c"], name="apple.md", **v21(["c"], indexed_at="2025-03-02T09:00:00+00:00"))
    await seed(store, "d", ["d"], name="mango.md", **v21(["d"], indexed_at="2025-02-01T09:00:00+00:00"))
    catalog = DocumentCatalog(store)

    async def order(sort: Any, limit: int = 10, offset: int = 0) -> list[str]:
        page = await catalog.list_documents("kb-a", sort=sort, limit=limit, offset=offset)
        assert page.total == 4
        return [doc.file_id for doc in page.documents]

    assert await order("-ingested_at") == ["c", "a", "b", "d"]
    assert await order("ingested_at") == ["d", "a", "b", "c"]
    # Case-insensitive; "Zebra.md" and "zebra.md" tie and keep file_id order.
    assert await order("name") == ["c", "d", "a", "b"]
    assert await order("-name") == ["a", "b", "d", "c"]
    pages = [await order("-ingested_at", limit=3, offset=offset) for offset in (0, 3, 6)]
    assert pages == [["c", "a", "b"], ["d"], []]


async def test_tenants_are_isolated(store: ChunkStore) -> None:
    await seed(store, "f", THREE, tenant="kb-a", **v21(THREE))
    await seed(store, "g", ["tenant b text"], tenant="kb-b", **v21(["tenant b text"], format="pdf"))
    await seed(store, "f", ["tenant b copy of f"], tenant="kb-b", **v21(["x"]))
    catalog = DocumentCatalog(store)

    assert [doc.file_id for doc in (await catalog.list_documents("kb-a", limit=10)).documents] == ["f"]
    assert await catalog.document("g", "kb-a") is None
    assert await catalog.read_text("g", "kb-a") is None
    assert not await catalog.update("g", "kb-a", DocumentChanges(tags=["x"]))
    stats = await catalog.stats("kb-a")
    assert (stats.documents, stats.chunks, stats.formats) == (1, 3, {"md": 1})
    text = await catalog.read_text("f", "kb-b")
    assert text is not None
    assert text.text == "tenant b copy of f"
    empty = await catalog.stats("kb-none")
    assert (empty.documents, empty.chunks, empty.text_bytes, empty.languages, empty.last_ingest) == (0, 0, 0, {}, None)


async def test_update_replaces_the_given_keys_on_every_point_pending_ones_too(store: ChunkStore) -> None:
    await seed(store, "f", THREE, **v21(THREE, attributes={"year": 2025, "team": "ops"}))
    await seed(store, "f", ["a run still writing"], seq=SEQ_2025 + 1, state=PENDING_STATE, **v21(["x"]))
    await seed(store, "f", ["other tenant"], tenant="kb-b", **v21(["x"]))
    catalog = DocumentCatalog(store)

    changes = DocumentChanges(tags=["new"], category=None, attributes={"year": 2026}, name="renamed.md")
    assert await catalog.update("f", "kb-a", changes)

    records, _ = await store.scroll(None, limit=100)
    metas = {record.point_id: record.payload["meta"] for record in records}
    kb_a = [meta for meta in metas.values() if meta["collection_name"] == "kb-a"]
    assert len(kb_a) == 4
    for meta in kb_a:
        assert meta["tags"] == ["new"]
        assert meta.get("category") is None
        assert meta["attributes"] == {"year": 2026}  # the whole object, "team" gone
        assert (meta["name"], meta["source"]) == ("renamed.md", "renamed.md")
    [kb_b] = [meta for meta in metas.values() if meta["collection_name"] == "kb-b"]
    assert (kb_b["tags"], kb_b["category"], kb_b["name"]) == (["policy"], "hr", "f.md")

    # Only what is given changes.
    assert await catalog.update("f", "kb-a", DocumentChanges(category="finance"))
    entry = await catalog.document("f", "kb-a")
    assert entry is not None
    assert (entry.tags, entry.category, entry.name, entry.chunks) == (["new"], "finance", "renamed.md", 3)


async def test_a_file_with_no_committed_chunk_is_not_updated(store: ChunkStore) -> None:
    await seed(store, "p", ["pending"], state=PENDING_STATE, **v21(["pending"]))
    catalog = DocumentCatalog(store)
    assert not await catalog.update("p", "kb-a", DocumentChanges(tags=["x"]))
    assert not await catalog.update("missing", "kb-a", DocumentChanges(tags=["x"]))
    records, _ = await store.scroll(None, limit=10)
    assert [record.payload["meta"]["tags"] for record in records] == [["policy"]]


async def test_more_documents_than_the_limit_fail_loudly_unless_narrowed(store: ChunkStore) -> None:
    for index in range(3):
        await seed(store, f"f{index}", ["text"], **v21(["text"], format="pdf" if index == 0 else "md"))
    catalog = DocumentCatalog(store, max_documents=2)
    with pytest.raises(TooManyDocumentsError) as caught:
        await catalog.list_documents("kb-a", limit=1)
    assert "more than 2 documents" in caught.value.detail()
    with pytest.raises(TooManyDocumentsError):
        await catalog.stats("kb-a")
    narrowed = await catalog.list_documents("kb-a", conditions=[match("format", "pdf")], limit=10)
    assert [doc.file_id for doc in narrowed.documents] == ["f0"]
    assert (await DocumentCatalog(store, max_documents=3).stats("kb-a")).documents == 3


async def test_read_pages_stitches_each_page_of_the_newest_version_and_keeps_its_first_chunk_meta(
    store: ChunkStore,
) -> None:
    words = [f"word{index:03d}" for index in range(50)]
    # Two windows per page (5 words shared), and a footer that also opens the next page.
    first, second = " ".join(words[:25]), " ".join(words[25:])
    footer = "Harbour Office annual report 2024"
    chunks = [
        " ".join(first.split()[:15]),
        " ".join(first.split()[10:]) + f" {footer}",
        f"{footer} " + " ".join(second.split()[:15]),
        " ".join(second.split()[10:]),
    ]
    pages = [{"page": 0, "headers": [], "mime_type": "application/pdf", "title": "Annual report"}] * 2
    pages += [{"page": 1, "headers": [], "mime_type": "application/pdf", "title": "Annual report"}] * 2
    await seed(store, "report", ["old " * 10] * 2, seq=SEQ_2024, chunk_meta=[{"page": 7}] * 2)
    await seed(store, "report", chunks, chunk_meta=pages, **v21(chunks))
    await seed(store, "notes", THREE, **v21(THREE))
    catalog = DocumentCatalog(store)

    report = await catalog.read_pages("report", "kb-a")
    assert [page.text for page in report] == [f"{first} {footer}", f"{footer} {second}"]
    assert [(page.meta["page"], page.meta["split_id"], page.meta["title"]) for page in report] == [
        (0, 0, "Annual report"),
        (1, 2, "Annual report"),
    ]
    read = await catalog.read_text("report", "kb-a")
    assert read is not None
    assert "\n\n".join(page.text for page in report) == read.text

    # Chunks without a page: the whole text as one.
    [notes] = await catalog.read_pages("notes", "kb-a")
    assert notes.text == "\n\n".join(THREE)  # shares too little to be a window overlap
    assert "page" not in notes.meta
    assert await catalog.read_pages("absent", "kb-a") == []
