"""The ingest fingerprint changes with everything that shapes the stored chunks, and only with that."""

from __future__ import annotations

import pytest

from ingestion_service.pipeline import fingerprint
from ingestion_service.pipeline.fingerprint import ingest_fingerprint

from ..conftest import make_settings  # noqa: TID252


def test_a_new_chunking_revision_changes_the_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = make_settings()
    before = ingest_fingerprint(settings, "kreuzberg")
    monkeypatch.setattr(fingerprint, "CHUNKING_REVISION", fingerprint.CHUNKING_REVISION + 1)
    assert ingest_fingerprint(settings, "kreuzberg") != before


@pytest.mark.parametrize(("name", "value"), [("embed_document_title", False), ("chunk_table_rows", "markdown")])
def test_the_chunk_context_settings_change_the_fingerprint(name: str, value: object) -> None:
    default = ingest_fingerprint(make_settings(), "kreuzberg")
    assert ingest_fingerprint(make_settings(**{name: value}), "kreuzberg") != default


def test_a_timeout_does_not_change_the_fingerprint() -> None:
    default = ingest_fingerprint(make_settings(), "kreuzberg")
    assert ingest_fingerprint(make_settings(ingest_timeout_seconds=17), "kreuzberg") == default
