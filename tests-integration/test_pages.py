"""Page numbers end to end, on a real two-page PDF, for the default engine (kreuzberg) and pypdf.

Every engine stores the 0-based page of a chunk's start, and the pipeline chunks each page on its
own, so no chunk spans two pages. This follows the page from the ingest request (the fork's
multipart shape) through the store (the inspection API) to the metadata /search returns, which is
what Open WebUI's citations show (as ``page + 1``).

The engine is a setting of the ingestion service (EXTRACTION_ENGINE), not a field of the ingest
request, so the pypdf run gets a `rag dev` of its own with EXTRACTION_ENGINE=pypdf.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from integration_support import FIXTURES, Stack, running_rag_dev

PDF = FIXTURES / "unstructured__multi-column-2p.pdf"
ENGINES = ["kreuzberg", "pypdf"]
# Each phrase occurs on one page only (the fixture's text, read with pypdf): a question whose
# answer lies there, and words of that page's text the top hit must hold.
FIRST_PAGE = ("Who played the villain Sauron in the Lord of the Rings trilogy?", "Sauron")
SECOND_PAGE = ("Where was the 8th Dalai Lama born, and who voiced Meg on Family Guy?", "Dalai Lama")


@pytest.fixture(scope="module")
def pypdf_stack(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A second `rag dev` whose ingestion service reads documents with pypdf."""
    with running_rag_dev(tmp_path_factory.mktemp("pypdf-stack"), stack.s3, {"EXTRACTION_ENGINE": "pypdf"}) as running:
        yield running


@pytest.fixture(scope="module", params=ENGINES)
def ingested(request: pytest.FixtureRequest, unique: str) -> dict[str, Any]:
    """The PDF ingested as the fork uploads it (multipart) by one engine's stack."""
    engine: str = request.param
    target: Stack = request.getfixturevalue("stack" if engine == "kreuzberg" else "pypdf_stack")
    file_id = str(uuid.uuid4())
    collection = f"kb-pages-{engine}-{unique}"
    with PDF.open("rb") as handle:
        response = target.ingestion().put(
            "/api/v1/ingest",
            files={"file": ("Dense Passage Retrieval.pdf", handle)},
            data={
                "file_id": file_id,
                "filename": "Dense Passage Retrieval.pdf",
                "collection_name": collection,
                "collection_type": "file",
                "user_id": "user-1",
                "overwrite": "true",
            },
        )
    assert response.status_code == 200, response.text
    assert response.json()["extraction"]["engine"] == engine
    assert response.json()["chunks_count"] > 2
    return {"engine": engine, "stack": target, "file_id": file_id, "collection": collection}


def top_hit(ingested: dict[str, Any], query: str) -> tuple[str, dict[str, Any]]:
    stack: Stack = ingested["stack"]
    response = stack.retrieval().post(
        "/search", json={"queries": [query], "collection_names": [ingested["collection"]], "k": 3}
    )
    assert response.status_code == 200, response.text
    [documents] = response.json()["documents"]
    [metadatas] = response.json()["metadatas"]
    assert len(documents) == 3
    for meta in metadatas:
        assert meta["file_id"] == ingested["file_id"]
        assert type(meta["page"]) is int
    return documents[0], metadatas[0]


def test_a_second_page_phrase_is_page_1(ingested: dict[str, Any]) -> None:
    query, words = SECOND_PAGE
    text, meta = top_hit(ingested, query)
    assert words in text
    assert meta["page"] == 1


def test_a_first_page_phrase_is_page_0(ingested: dict[str, Any]) -> None:
    query, words = FIRST_PAGE
    text, meta = top_hit(ingested, query)
    assert words in text
    assert meta["page"] == 0


def squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def extracted_pages(ingested: dict[str, Any]) -> dict[int, str]:
    """The engine's own reading of the file, page by page (POST /api/v1/extract stores nothing)."""
    stack: Stack = ingested["stack"]
    with PDF.open("rb") as handle:
        response = stack.ingestion().post(
            "/api/v1/extract", files={"file": (PDF.name, handle)}, data={"engine": ingested["engine"]}
        )
    assert response.status_code == 200, response.text
    pages = {document["meta"]["page"]: document["content"] for document in response.json()["documents"]}
    assert sorted(pages) == [0, 1]
    return pages


def test_no_chunk_spans_two_pages(ingested: dict[str, Any]) -> None:
    stack: Stack = ingested["stack"]
    pages = {page: squeeze(text) for page, text in extracted_pages(ingested).items()}
    response = stack.ingestion().get(
        f"/api/v1/documents/{ingested['file_id']}/chunks", params={"limit": 1000, "include_content": "full"}
    )
    assert response.status_code == 200, response.text
    chunks = sorted(response.json()["chunks"], key=lambda chunk: chunk["split_id"])
    assert len(chunks) == response.json()["stats"]["total_chunks"] > 2
    stored = [chunk["meta"]["page"] for chunk in chunks]
    assert all(type(page) is int for page in stored)
    assert set(stored) == {0, 1}
    assert stored == sorted(stored)  # in reading order: page 0's chunks, then page 1's
    for chunk, page in zip(chunks, stored, strict=True):
        # Within its own page's text, so it holds nothing of the other page.
        assert squeeze(chunk["content"]) in pages[page], (page, chunk["content"][:200])


def test_the_fixture_phrases_are_on_one_page_each(ingested: dict[str, Any]) -> None:
    pages = extracted_pages(ingested)
    assert (FIRST_PAGE[1] in pages[0], FIRST_PAGE[1] in pages[1]) == (True, False)
    assert (SECOND_PAGE[1] in pages[0], SECOND_PAGE[1] in pages[1]) == (False, True)


def phrase_centre(page: int, phrase: str) -> tuple[float, float]:
    """Where PDFium's own text search finds ``phrase`` on ``page``: its first character's centre, as a
    fraction of the page (origin top-left; the fixture's pages are upright)."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(str(PDF))
    try:
        textpage = document[page].get_textpage()
        found = textpage.search(phrase).get_next()
        assert found is not None
        left, bottom, right, top = textpage.get_charbox(found[0])
        width, height = document[page].get_size()
    finally:
        document.close()
    return ((left + right) / 2 / width, 1 - (bottom + top) / 2 / height)


def test_a_hit_says_where_it_sits_on_its_page(ingested: dict[str, Any]) -> None:
    query, words = SECOND_PAGE
    _, meta = top_hit(ingested, query)
    assert meta["geometry"] == "text_layer"
    [region] = meta["regions"]
    assert region["page"] == meta["page"] == 1
    # The stored chunk that holds the phrase is boxed where PDFium's text search finds it.
    stack: Stack = ingested["stack"]
    response = stack.ingestion().get(
        f"/api/v1/documents/{ingested['file_id']}/chunks", params={"limit": 1000, "include_content": "full"}
    )
    assert response.status_code == 200, response.text
    [holder] = [chunk for chunk in response.json()["chunks"] if words in squeeze(chunk["content"])][:1]
    [stored] = holder["meta"]["regions"]
    assert stored["page"] == 1
    x, y = phrase_centre(1, words)
    assert any(x0 <= x <= x1 and y0 <= y <= y1 for x0, y0, x1, y1 in stored["boxes"])
