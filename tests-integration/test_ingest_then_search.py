"""The whole path through the real HTTP APIs: ingest, search, tenants, re-ingest, delete."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from integration_support import BUCKET, FIXTURES, Stack, ingest_multipart

from rag_runtime.lexical import chunk_lexical_language

CONTRACT_PDF = FIXTURES / "kreuzberg__sample_contract.pdf"
TABLES_DOCX = FIXTURES / "docling__word_tables.docx"
SCAN_PDF = FIXTURES / "kreuzberg__non_searchable.pdf"


def ingest_s3(stack: Stack, path: Path, file_id: str, collection: str) -> dict[str, Any]:
    key = f"uploads/{file_id}_{path.name}"
    stack.s3.put(BUCKET, key, path)
    response = stack.ingestion().put(
        "/api/v1/ingest",
        json={
            "s3_bucket": BUCKET,
            "s3_key": key,
            "file_id": file_id,
            "filename": path.name,
            "collection_name": collection,
            "collection_type": "file",
            "user_id": "user-1",
            "overwrite": True,
        },
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def search(stack: Stack, query: str, collections: list[str], k: int = 5, path: str = "/search") -> dict[str, Any]:
    # An absolute URL: httpx would read a relative "//search" as a host name.
    response = stack.retrieval().post(
        f"{stack.retrieval_url}{path}", json={"queries": [query], "collection_names": collections, "k": k}
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert len(body["documents"]) == 1  # one merged list: the only one Open WebUI reads
    return body


def chunks_of(stack: Stack, file_id: str) -> list[dict[str, Any]]:
    response = stack.ingestion().get(f"/api/v1/documents/{file_id}/chunks", params={"limit": 1000})
    assert response.status_code == 200, response.text
    chunks: list[dict[str, Any]] = response.json()["chunks"]
    return chunks


@pytest.fixture(scope="module")
def knowledge_base(stack: Stack, unique: str) -> dict[str, str]:
    """One knowledge base holding a PDF (multipart) and a DOCX (S3 key)."""
    kb = f"kb-{unique}"
    pdf_id, docx_id = str(uuid.uuid4()), str(uuid.uuid4())
    pdf = ingest_multipart(stack.ingestion(), CONTRACT_PDF, pdf_id, kb)
    docx = ingest_s3(stack, TABLES_DOCX, docx_id, kb)
    assert pdf["status"] is True
    assert pdf["collection_name"] == kb
    assert pdf["chunks_count"] >= 5
    assert docx["status"] is True
    assert docx["chunks_count"] >= 1
    return {"kb": kb, "pdf": pdf_id, "docx": docx_id}


def test_search_finds_the_right_chunk_in_a_pdf_ingested_by_multipart(
    stack: Stack, knowledge_base: dict[str, str]
) -> None:
    body = search(stack, "What insurance coverage must the consultant obtain and maintain?", [knowledge_base["kb"]])
    top_text, top_meta = body["documents"][0][0], body["metadatas"][0][0]
    assert top_meta["file_id"] == knowledge_base["pdf"]
    assert "insurance" in top_text.lower()
    assert top_meta["name"] == CONTRACT_PDF.name
    assert top_meta["source"] == CONTRACT_PDF.name
    distances = body["distances"][0]
    assert distances == sorted(distances, reverse=True)


def test_search_finds_the_docx_ingested_by_s3_key(stack: Stack, knowledge_base: dict[str, str]) -> None:
    body = search(stack, "non-uniform table with vertical spans", [knowledge_base["kb"]], path="//search")
    assert body["metadatas"][0][0]["file_id"] == knowledge_base["docx"]


def test_another_tenant_sees_nothing_of_the_first(stack: Stack, knowledge_base: dict[str, str], unique: str) -> None:
    other_kb = f"kb-other-{unique}"
    ingest_multipart(stack.ingestion(), FIXTURES / "tika__danish_europarl_sample.txt", str(uuid.uuid4()), other_kb)
    body = search(stack, "What insurance coverage must the consultant obtain and maintain?", [other_kb], k=20)
    own_files = {knowledge_base["pdf"], knowledge_base["docx"]}
    assert body["metadatas"][0]  # the other tenant has chunks of its own
    assert all(meta["collection_name"] == other_kb for meta in body["metadatas"][0])
    assert not own_files & {meta["file_id"] for meta in body["metadatas"][0]}


def test_reingest_leaves_exactly_one_version(stack: Stack, unique: str) -> None:
    kb, file_id = f"kb-re-{unique}", str(uuid.uuid4())
    first = ingest_multipart(stack.ingestion(), TABLES_DOCX, file_id, kb)
    second = ingest_multipart(stack.ingestion(), TABLES_DOCX, file_id, kb)
    chunks = chunks_of(stack, file_id)
    versions = {chunk["meta"]["ingest_version"] for chunk in chunks}
    assert len(versions) == 1
    assert len(chunks) == second["chunks_count"] == first["chunks_count"]
    assert sorted(chunk["meta"]["split_id"] for chunk in chunks) == list(range(len(chunks)))


def test_delete_removes_the_file_from_search(stack: Stack, unique: str) -> None:
    kb, file_id = f"kb-del-{unique}", str(uuid.uuid4())
    ingested = ingest_multipart(stack.ingestion(), TABLES_DOCX, file_id, kb)
    response = stack.ingestion().delete(f"/api/v1/documents/{file_id}")
    assert response.status_code == 200, response.text
    assert response.json()["chunks_deleted"] == ingested["chunks_count"]
    body = search(stack, "uniform table header cells", [kb])
    assert body["documents"][0] == []
    again = stack.ingestion().delete(f"/api/v1/documents/{file_id}")
    assert again.status_code == 200
    assert again.json()["chunks_deleted"] == 0


def test_delete_can_be_scoped_to_one_collection(stack: Stack, unique: str) -> None:
    file_id = str(uuid.uuid4())
    kb_a, kb_b = f"kb-a-{unique}", f"kb-b-{unique}"
    ingest_multipart(stack.ingestion(), TABLES_DOCX, file_id, kb_a)
    ingest_multipart(stack.ingestion(), TABLES_DOCX, file_id, kb_b)
    response = stack.ingestion().delete(f"/api/v1/documents/{file_id}", params={"collection_name": kb_a})
    assert response.status_code == 200, response.text
    assert search(stack, "uniform table header cells", [kb_a])["documents"][0] == []
    assert search(stack, "uniform table header cells", [kb_b])["documents"][0] != []


NORWEGIAN_NOTES = {
    "elbil.txt": (
        "Familien kjøpte en ny elbil i fjor. Bilen er rød, og den står parkert i garasjen ved siden av "
        "syklene. De lader den hver natt."
    ),
    "budsjett.txt": "Kommunestyret vedtok budsjettet for neste år etter en lang debatt om skoler og eldreomsorg.",
    "laks.txt": "Laksen vandrer opp elvene om sommeren for å gyte, og fiskere står langs bredden med stang og snøre.",
}


def test_a_norwegian_question_finds_its_answer_without_sharing_a_word_with_it(
    stack: Stack, unique: str, tmp_path: Path
) -> None:
    # No word of the question is in any note, so neither BM25 nor BM42 can match, and the English
    # dense model sits out over Norwegian: only the multilingual vector can find the answer.
    kb = f"kb-no-{unique}"
    ids = {}
    for name, text in NORWEGIAN_NOTES.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        ids[name] = str(uuid.uuid4())
        assert ingest_multipart(stack.ingestion(), path, ids[name], kb)["status"] is True
    body = search(stack, "Hvilken farge har kjøretøyet?", [kb], k=3)
    assert body["metadatas"][0][0]["file_id"] == ids["elbil.txt"]
    # Each is read as Norwegian (Bokmål "nb" and fastText's "no" are one BM25 language).
    assert [chunk_lexical_language(meta) for meta in body["metadatas"][0]] == ["no", "no", "no"]


def test_wrong_keys_are_refused(stack: Stack) -> None:
    bad = httpx.post(
        f"{stack.retrieval_url}/search",
        json={"queries": ["x"], "collection_names": ["kb"]},
        headers={"Authorization": "Bearer " + "x" * 40},
    )
    assert bad.status_code == 401
    assert bad.headers["www-authenticate"].lower().startswith("bearer")
    assert httpx.put(f"{stack.ingestion_url}/api/v1/ingest", json={}).status_code == 401


def test_a_scan_is_ocrd_and_found_with_its_page(stack: Stack, unique: str) -> None:
    kb = f"kb-scan-{unique}"
    file_id = str(uuid.uuid4())
    ingest_multipart(stack.ingestion(), SCAN_PDF, file_id, kb)
    body = search(stack, "a PDF created from an image cannot be rendered as plain text", [kb], k=3)
    assert "non-text-searchable PDF" in body["documents"][0][0]
    meta = body["metadatas"][0][0]
    assert meta["file_id"] == file_id
    # 0-based: Open WebUI shows "page 1" and links #page=1.
    assert meta["page"] == 0
    assert meta["extractor"] == "kreuzberg"
    # Internal fields stay internal (SEARCH_METADATA_FIELDS).
    assert "user_id" not in meta
    assert "ingest_version" not in meta


def test_stock_open_webui_document_loader_gets_pages(stack: Stack) -> None:
    # What Open WebUI's ExternalDocumentLoader sends to EXTERNAL_DOCUMENT_LOADER_URL + "/process".
    response = stack.ingestion().put(
        "/process",
        content=SCAN_PDF.read_bytes(),
        headers={"Content-Type": "application/pdf", "X-Filename": "scan%20copy.pdf"},
    )
    assert response.status_code == 200, response.text
    [page] = response.json()
    assert "non-text-searchable PDF" in page["page_content"]
    assert page["metadata"]["source"] == "scan copy.pdf"
    assert page["metadata"]["page"] == 0
