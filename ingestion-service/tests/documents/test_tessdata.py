"""OCR_LANGUAGES against the installed Tesseract data: defaults, a joined directory, start-up errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ingestion_service.documents import tessdata
from shared_contract import ContractConfigError

if TYPE_CHECKING:
    from ..conftest import AppFactory  # noqa: TID252


@pytest.fixture(autouse=True)
def _keep_tessdata_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    # resolve() sets TESSDATA_PREFIX for the process; the fake data here must not outlive the test.
    monkeypatch.setenv("TESSDATA_PREFIX", os.environ.get("TESSDATA_PREFIX", ""))


def _data(directory: Path, *languages: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for language in languages:
        (directory / f"{language}.traineddata").write_bytes(b"model " + language.encode())
    return directory


def test_default_is_english_plus_danish_when_danish_is_installed(tmp_path: Path) -> None:
    wheel = _data(tmp_path / "wheel", "eng", "osd")
    system = _data(tmp_path / "system", "dan", "deu")
    resolved = tessdata.resolve(enabled=True, configured=None, dirs=[wheel, system], link_root=tmp_path / "links")
    assert resolved.languages == ("eng", "dan")
    assert resolved.tesseract_language == "eng+dan"
    assert resolved.available == ("dan", "deu", "eng")
    # Tesseract reads one directory: links to both files (and osd) are joined there.
    joined = resolved.tessdata_dir
    assert joined is not None
    assert sorted(path.name for path in joined.iterdir()) == ["dan.traineddata", "eng.traineddata", "osd.traineddata"]
    assert (joined / "dan.traineddata").read_bytes() == b"model dan"
    assert os.environ["TESSDATA_PREFIX"] == str(joined)


def test_default_is_english_alone_without_danish(tmp_path: Path) -> None:
    wheel = _data(tmp_path / "wheel", "eng", "osd")
    resolved = tessdata.resolve(enabled=True, configured=None, dirs=[wheel])
    assert resolved.languages == ("eng",)
    # All in one directory: used as it is.
    assert resolved.tessdata_dir == wheel


def test_a_configured_language_without_data_is_a_config_error(tmp_path: Path) -> None:
    wheel = _data(tmp_path / "wheel", "eng")
    with pytest.raises(ContractConfigError) as caught:
        tessdata.resolve(enabled=True, configured="eng+nor", dirs=[wheel])
    assert caught.value.variable == "OCR_LANGUAGES"
    assert "no Tesseract data for nor" in caught.value.problem
    assert "installed: eng" in caught.value.problem


def test_disabled_ocr_needs_no_data(tmp_path: Path) -> None:
    resolved = tessdata.resolve(enabled=False, configured="eng+nor", dirs=[tmp_path / "empty"])
    assert resolved.report() == {"enabled": False, "languages": [], "available": []}


def test_tessdata_dirs_come_first(tmp_path: Path) -> None:
    extra = _data(tmp_path / "extra", "eng")
    assert tessdata.search_dirs(f"{extra}:{tmp_path / 'more'}", environ={})[:2] == [extra, tmp_path / "more"]


def test_service_refuses_to_start_with_a_missing_ocr_language(app_client: AppFactory) -> None:
    with pytest.raises(ContractConfigError, match="no Tesseract data for zzz"), app_client(ocr_languages="eng+zzz"):
        pass
