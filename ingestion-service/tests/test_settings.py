"""Settings validation and defaults."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ingestion_service.settings import Settings
from shared_contract import ContractConfigError, load_settings

if TYPE_CHECKING:
    from .conftest import MakeSettings  # noqa: TID252


def test_defaults(make_test_settings: MakeSettings) -> None:
    settings = make_test_settings()
    assert settings.chunk_split_by == "markdown"
    assert (settings.chunk_size, settings.chunk_overlap, settings.chunk_min_size) == (400, 80, 100)
    assert settings.lexical_window_chunks == 0
    assert settings.extraction_engine == "kreuzberg"
    assert settings.max_upload_bytes == 100 * 1024 * 1024
    assert settings.allowed_buckets == frozenset()


def test_bucket_list_parsing(make_test_settings: MakeSettings) -> None:
    assert make_test_settings(s3_allowed_buckets=" openwebui, other ,").allowed_buckets == {"openwebui", "other"}


@pytest.mark.parametrize(
    ("overrides", "variable"),
    [
        ({"api_key": "short"}, "API_KEY"),
        ({"chunk_overlap": 400}, "CHUNK_OVERLAP"),
        ({"chunk_min_size": 500}, "CHUNK_MIN_SIZE"),
        ({"kreuzberg_url": "ftp://x"}, "KREUZBERG_URL"),
        ({"extraction_engine": "auto"}, "EXTRACTION_ENGINE"),
        ({"chunk_split_by": "paragraph"}, "CHUNK_SPLIT_BY"),
    ],
)
def test_invalid_values_name_the_variable(
    make_test_settings: MakeSettings, overrides: dict[str, object], variable: str
) -> None:
    with pytest.raises(ContractConfigError) as caught:
        make_test_settings(**overrides)
    assert caught.value.variable == variable


def test_api_key_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("API_KEY", raising=False)
    with pytest.raises(ContractConfigError) as caught:
        load_settings(Settings, qdrant_uri=":memory:")
    assert caught.value.variable == "API_KEY"
