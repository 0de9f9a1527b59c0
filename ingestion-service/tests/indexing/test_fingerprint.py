"""The ingest fingerprint changes with everything that shapes the stored chunks, and only with that."""

from __future__ import annotations

import pytest

from ingestion_service.indexing import fingerprint
from ingestion_service.indexing.fingerprint import ingest_fingerprint
from ingestion_service.settings import Settings
from shared_contract.settings import Fingerprint

from ..conftest import make_settings  # noqa: TID252


def test_a_new_chunking_revision_changes_the_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = make_settings()
    before = ingest_fingerprint(settings, "kreuzberg")
    monkeypatch.setattr(fingerprint, "CHUNKING_REVISION", fingerprint.CHUNKING_REVISION + 1)
    assert ingest_fingerprint(settings, "kreuzberg") != before


def test_a_new_extraction_revision_changes_the_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = make_settings()
    before = ingest_fingerprint(settings, "kreuzberg")
    monkeypatch.setattr(fingerprint, "EXTRACTION_REVISION", fingerprint.EXTRACTION_REVISION + 1)
    assert ingest_fingerprint(settings, "kreuzberg") != before


@pytest.mark.parametrize(("name", "value"), [("embed_document_title", False), ("chunk_table_rows", "markdown")])
def test_the_chunk_context_settings_change_the_fingerprint(name: str, value: object) -> None:
    default = ingest_fingerprint(make_settings(), "kreuzberg")
    assert ingest_fingerprint(make_settings(**{name: value}), "kreuzberg") != default


def test_a_timeout_does_not_change_the_fingerprint() -> None:
    default = ingest_fingerprint(make_settings(), "kreuzberg")
    assert ingest_fingerprint(make_settings(ingest_timeout_seconds=17), "kreuzberg") == default


def test_every_setting_is_marked_as_shaping_the_points_or_not() -> None:
    unmarked = [
        name
        for name, field in Settings.model_fields.items()
        if sum(isinstance(mark, Fingerprint) for mark in field.metadata) != 1
    ]
    assert unmarked == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("gotenberg_url", "http://gotenberg:3000"),
        ("vision_llm_api_base_url", "http://vllm:8000/v1"),
        ("kreuzberg_url", "http://kreuzberg-2:8000"),
        ("embedding_max_tokens", 128),
    ],
)
def test_an_endpoint_or_limit_that_changes_the_text_or_vectors_changes_the_fingerprint(
    name: str, value: object
) -> None:
    default = ingest_fingerprint(make_settings(), "kreuzberg")
    assert ingest_fingerprint(make_settings(**{name: value}), "kreuzberg") != default


def test_a_credential_does_not_change_the_fingerprint() -> None:
    default = ingest_fingerprint(make_settings(), "kreuzberg")
    assert ingest_fingerprint(make_settings(vision_llm_api_key="another-key"), "kreuzberg") == default
