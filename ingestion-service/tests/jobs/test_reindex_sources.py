"""An upload's pages as a reindex rebuilds them from its stored chunks (the HTTP round trip: tests/api/routes/test_reindex.py)."""

from __future__ import annotations

from ingestion_service.adapters.document_catalog import PageText
from ingestion_service.jobs.reindex_sources import rebuilt_pages


def test_a_rebuilt_page_keeps_the_extractors_metadata_and_drops_what_the_run_stamps_again() -> None:
    extracted = {
        "page": 3,
        "title": "Annual report",
        "authors": ["K. Shultz"],
        "languages": ["en"],
        "extractor": "kreuzberg",
        "mime_type": "application/pdf",
        "ocr_languages": "eng",
    }
    stamped = {
        "file_id": "report",
        "collection_name": "kb-a",
        "name": "report.pdf",
        "tags": ["finance"],
        "split_id": 12,
        "headers": ["Revenue"],
        "content_hash": "ab" * 32,
        "language": "en",
        "lexical_language": "en",
        "ingest_version": "00000000000000000007",
        "ingest_seq": 7,
        "ingest_state": "live",
        "live_in": "kb-a",
        "chunk_count": 40,
        "text_bytes": 9000,
        "source_sha256": "cd" * 32,
        "ingest_fingerprint": "f" * 16,
    }
    [page] = rebuilt_pages([PageText(text="Revenue grew by four percent.", meta={**extracted, **stamped})])
    assert (page.content, page.meta) == ("Revenue grew by four percent.", extracted)
