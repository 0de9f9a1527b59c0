"""A knowledge base kept by a client (issue 15), through both real HTTP APIs: labels at ingest, metadata
filters in /search, unchanged re-ingests, vectors reused across collections, the documents API and stats."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest
from integration_support import FIXTURES, Stack, ingest_multipart

CONTRACT_PDF = FIXTURES / "kreuzberg__sample_contract.pdf"
TABLES_DOCX = FIXTURES / "docling__word_tables.docx"


def search_files(stack: Stack, query: str, collections: list[str], search_filter: dict[str, Any]) -> set[str]:
    response = stack.retrieval().post(
        f"{stack.retrieval_url}/search",
        json={"queries": [query], "collection_names": collections, "k": 10, "filter": search_filter},
    )
    assert response.status_code == 200, response.text
    return {meta["file_id"] for meta in response.json()["metadatas"][0]}


@pytest.fixture(scope="module")
def kb(stack: Stack, unique: str) -> dict[str, str]:
    name = f"kb-labels-{unique}"
    pdf, docx = str(uuid.uuid4()), str(uuid.uuid4())
    ingest_multipart(stack.ingestion(), CONTRACT_PDF, pdf, name, tags="contracts,signed", category="legal")
    ingest_multipart(stack.ingestion(), TABLES_DOCX, docx, name, tags='["tables"]', category="reference")
    return {"name": name, "pdf": pdf, "docx": docx}


def test_search_filters_narrow_to_the_matching_documents(stack: Stack, kb: dict[str, str]) -> None:
    both = search_files(stack, "agreement table", [kb["name"]], {})
    assert both == {kb["pdf"], kb["docx"]}
    assert search_files(stack, "agreement table", [kb["name"]], {"tags": ["contracts"]}) == {kb["pdf"]}
    assert search_files(stack, "agreement table", [kb["name"]], {"category": "reference"}) == {kb["docx"]}
    assert search_files(stack, "agreement table", [kb["name"]], {"formats": ["DOCX"]}) == {kb["docx"]}
    assert search_files(stack, "agreement table", [kb["name"]], {"ingested_after": "2999-01-01T00:00:00Z"}) == set()


def test_an_unknown_filter_key_is_422_naming_it(stack: Stack, kb: dict[str, str]) -> None:
    response = stack.retrieval().post(
        f"{stack.retrieval_url}/search",
        json={"queries": ["agreement"], "collection_names": [kb["name"]], "filter": {"colour": ["red"]}},
    )
    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"
    assert "colour" in response.json()["error"]


def test_re_sending_the_same_file_is_unchanged_and_patched_tags_are_searchable(
    stack: Stack, kb: dict[str, str]
) -> None:
    again = ingest_multipart(stack.ingestion(), CONTRACT_PDF, kb["pdf"], kb["name"])
    assert again["unchanged"] is True
    assert again["content_hash"] == hashlib.sha256(CONTRACT_PDF.read_bytes()).hexdigest()
    patched = stack.ingestion().patch(
        f"/api/v1/documents/{kb['pdf']}", params={"collection_name": kb["name"]}, json={"tags": ["renewal"]}
    )
    assert patched.status_code == 200, patched.text
    assert search_files(stack, "agreement", [kb["name"]], {"tags": ["renewal"]}) == {kb["pdf"]}
    assert search_files(stack, "agreement", [kb["name"]], {"tags": ["contracts"]}) == set()


def test_the_documents_api_lists_reads_and_counts_the_knowledge_base(stack: Stack, kb: dict[str, str]) -> None:
    listing = stack.ingestion().get("/api/v1/documents", params={"collection_name": kb["name"]})
    assert listing.status_code == 200, listing.text
    documents = {document["file_id"]: document for document in listing.json()["documents"]}
    assert set(documents) == {kb["pdf"], kb["docx"]}
    assert documents[kb["docx"]]["content_hash"] == hashlib.sha256(TABLES_DOCX.read_bytes()).hexdigest()
    assert documents[kb["docx"]]["format"] == "docx"
    text = stack.ingestion().get(f"/api/v1/documents/{kb['pdf']}/text", params={"collection_name": kb["name"]})
    assert text.status_code == 200, text.text
    assert "agreement" in text.json()["text"].lower()
    stats = stack.ingestion().get(f"/api/v1/collections/{kb['name']}/stats")
    assert stats.status_code == 200, stats.text
    body = stats.json()
    assert body["documents"] == 2
    assert body["chunks"] == sum(document["chunks"] for document in documents.values())
    assert body["formats"] == {"pdf": 1, "docx": 1}


def test_the_same_file_in_a_second_knowledge_base_reuses_its_vectors(
    stack: Stack, kb: dict[str, str], unique: str
) -> None:
    other = f"kb-copy-{unique}"
    body = ingest_multipart(stack.ingestion(), TABLES_DOCX, kb["docx"], other)
    assert body["extraction"]["reused_vectors"] is True
    assert search_files(stack, "table", [other], {}) == {kb["docx"]}
