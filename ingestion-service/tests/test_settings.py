"""Settings validation and defaults."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ingestion_service.settings import GROUPS, ChunkingSettings, Settings
from shared_contract import ContractConfigError, load_settings
from shared_contract.settings import group_fields

if TYPE_CHECKING:
    from .conftest import MakeSettings  # noqa: TID252


def test_defaults(make_test_settings: MakeSettings) -> None:
    settings = make_test_settings()
    assert settings.chunk_split_by == "markdown"
    assert (settings.chunk_size, settings.chunk_overlap, settings.chunk_min_size) == (400, 80, 100)
    assert settings.lexical_window_chunks == 0
    assert settings.extraction_engine == "kreuzberg"
    assert settings.enable_ocr is True
    assert settings.vision_llm_api_base_url == settings.gotenberg_url == ""
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
        ({"extraction_engine": "magic"}, "EXTRACTION_ENGINE"),
        ({"ocr_languages": "eng+../x"}, "OCR_LANGUAGES"),
        ({"gotenberg_url": "ftp://x"}, "GOTENBERG_URL"),
        ({"extraction_router_scan_engine": "tesseract"}, "EXTRACTION_ROUTER_SCAN_ENGINE"),
        ({"chunk_split_by": "paragraph"}, "CHUNK_SPLIT_BY"),
        # The staging area must hold at least one upload.
        ({"max_upload_bytes": 10_000, "scratch_max_bytes": 9_999}, "SCRATCH_MAX_BYTES"),
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


def test_engine_names_are_case_insensitive(make_test_settings: MakeSettings) -> None:
    settings = make_test_settings(extraction_engine=" Kreuzberg ", extraction_router_default="PyPDF")
    assert (settings.extraction_engine, settings.extraction_router_default) == ("kreuzberg", "pypdf")


def test_auto_is_a_valid_engine_setting(make_test_settings: MakeSettings) -> None:
    assert make_test_settings(extraction_engine="auto").extraction_engine == "auto"


def test_ocr_languages_are_normalised(make_test_settings: MakeSettings) -> None:
    assert make_test_settings(ocr_languages=" eng + dan ").ocr_languages == "eng+dan"
    assert make_test_settings(ocr_languages="eng,chi_sim").ocr_languages == "eng+chi_sim"


def test_vision_is_configured_by_a_base_url_or_a_provider_model(make_test_settings: MakeSettings) -> None:
    assert make_test_settings().vision_configured is False
    assert make_test_settings(vision_llm_api_base_url="http://vllm:8000/v1/").vision_llm_api_base_url == (
        "http://vllm:8000/v1"
    )
    assert make_test_settings(vision_llm_api_base_url="http://vllm:8000/v1").vision_configured is True
    assert make_test_settings(vision_llm_model="anthropic/claude-sonnet-4-5").vision_configured is True


@pytest.mark.parametrize("spelling", ["info", "Info", " INFO "])
def test_log_level_is_case_insensitive(make_test_settings: MakeSettings, spelling: str) -> None:
    assert make_test_settings(log_level=spelling).log_level == "INFO"


def test_unknown_log_level_names_the_variable(make_test_settings: MakeSettings) -> None:
    with pytest.raises(ContractConfigError, match=r"^LOG_LEVEL"):
        make_test_settings(log_level="verbose")


def test_every_setting_belongs_to_exactly_one_group() -> None:
    owners = {
        name: [group.__name__ for group in GROUPS if name in group_fields(group)] for name in Settings.model_fields
    }
    assert {name: groups for name, groups in owners.items() if len(groups) != 1} == {}
    assert all(issubclass(Settings, group) for group in GROUPS)


def test_no_group_validator_shadows_another() -> None:
    # Validators are looked up by name across the bases: a name two groups share keeps only one.
    names = [
        name
        for group in GROUPS
        for kind in (group.__pydantic_decorators__.field_validators, group.__pydantic_decorators__.model_validators)
        for name in kind
    ]
    assert sorted(names) == sorted(set(names))


def test_a_group_reads_its_flat_variables_and_checks_them_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHUNK_SIZE", "500")
    assert ChunkingSettings(_env_file=None).chunk_size == 500
    monkeypatch.setenv("CHUNK_OVERLAP", "500")
    with pytest.raises(ContractConfigError, match=r"^CHUNK_OVERLAP"):
        load_settings(ChunkingSettings, _env_file=None)
