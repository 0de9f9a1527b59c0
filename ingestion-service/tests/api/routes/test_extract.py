"""POST /api/v1/extract: the converter alone."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fastapi.testclient import TestClient

if TYPE_CHECKING:
    import httpx2

    from ...conftest import AppFactory  # noqa: TID252
    from ...scripted_servers import GotenbergStandIn, ScriptedVisionServer  # noqa: TID252

from ...scripted_servers import VisionReply  # noqa: TID252


def _extract(client: TestClient, path: Path, query: str = "", **fields: str) -> httpx2.Response:
    with path.open("rb") as handle:
        return client.post(f"/api/v1/extract{query}", data=fields, files={"file": (path.name, handle)})


def test_default_engine_returns_documents(client: TestClient, docs: Path) -> None:
    response = _extract(client, docs / "docx/docling__word_tables.docx")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] is True
    assert body["engine"] == "kreuzberg"
    assert body["profile"] is None
    [document] = body["documents"]
    assert "| Header 0.0 |" in document["content"]
    assert document["meta"]["languages"] == ["en"]


def test_engine_override_pypdf_gives_pages(client: TestClient, docs: Path) -> None:
    body = _extract(client, docs / "pdf/unstructured__list-item-example.pdf", engine="pypdf").json()
    assert body["engine"] == "pypdf"
    assert [doc["meta"]["page"] for doc in body["documents"]] == [0, 1]
    assert body["pages"] == 2
    assert body["characters"] == sum(len(doc["content"]) for doc in body["documents"])


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"engine": "kreuzberg", "engines": "pypdf"}, "not both"),
        ({"engines": "pypdf,kreuzberg,pypdf"}, "twice"),
        ({"engines": "pypdf,nope"}, "engine (and each of engines) must be one of "),
        ({"engine": "nope"}, "engine (and each of engines) must be one of "),
        ({"profile": "diagram"}, "takes no profile"),
        ({"engine": "docling"}, "optional extra 'docling'"),
        ({"engine": "unstructured"}, "optional extra 'unstructured'"),
        ({"surprise": "1"}, "unknown form field"),
    ],
)
def test_invalid_choices_are_422(client: TestClient, docs: Path, fields: dict[str, str], fragment: str) -> None:
    response = _extract(client, docs / "md/unstructured__simple-table.md", **fields)
    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"
    assert fragment in response.json()["error"]


def test_text_without_an_extension_is_read_as_plain_text(client: TestClient, docs: Path) -> None:
    with (docs / "txt/tika__danish_europarl_sample.txt").open("rb") as handle:
        response = client.post("/api/v1/extract", files={"file": ("LICENSE", handle)})
    assert response.status_code == 200, response.text
    [document] = response.json()["documents"]
    assert "Europa" in document["content"]
    assert document["meta"]["mime_type"] == "text/plain"


@pytest.mark.parametrize(
    ("fields", "fragment", "a_choice"),
    [
        ({"engine": "secret-token-xyz"}, "engine (and each of engines) must be one of ", "kreuzberg"),
        ({"engines": "kreuzberg,secret-token-xyz"}, "engine (and each of engines) must be one of ", "pypdf"),
        ({"engine": "vision-llm", "profile": "secret-token-xyz"}, "profile must be one of ", "ocr"),
    ],
)
def test_a_refused_choice_names_the_field_and_the_choices_not_the_value(
    client: TestClient, docs: Path, fields: dict[str, str], fragment: str, a_choice: str
) -> None:
    response = _extract(client, docs / "md/unstructured__simple-table.md", **fields)
    assert response.status_code == 422
    error = response.json()["error"]
    assert fragment in error
    assert a_choice in error
    assert "secret-token-xyz" not in error.lower()


def test_scan_is_read_with_ocr(client: TestClient, docs: Path) -> None:
    body = _extract(client, docs / "pdf/kreuzberg__non_searchable.pdf").json()
    assert "non-text-searchable PDF" in body["documents"][0]["content"]
    assert body["documents"][0]["meta"]["ocr"] is True
    # The OCR word boxes feed the chunks' regions; the probe does not show them.
    assert "ocr_words" not in body["documents"][0]["meta"]


def test_engines_are_compared_side_by_side(client: TestClient, docs: Path) -> None:
    response = _extract(client, docs / "pdf/unstructured__list-item-example.pdf", engines="kreuzberg, PyPDF")
    assert response.status_code == 200
    body = response.json()
    kreuzberg, pypdf = body["results"]
    assert (kreuzberg["engine"], pypdf["engine"]) == ("kreuzberg", "pypdf")
    for result in (kreuzberg, pypdf):
        assert result["error"] is None
        assert result["pages"] == 2
        assert result["characters"] == sum(len(doc["content"]) for doc in result["documents"]) > 100
        assert result["seconds"] >= 0
    # The top level describes the first engine, as a single-engine probe would.
    assert body["engine"] == "kreuzberg"
    assert body["documents"] == kreuzberg["documents"]


def test_engines_in_the_query_string_are_compared_as_form_fields_are(client: TestClient, docs: Path) -> None:
    response = _extract(client, docs / "pdf/unstructured__list-item-example.pdf", "?engines=kreuzberg,pypdf")
    assert response.status_code == 200
    assert [row["engine"] for row in response.json()["results"]] == ["kreuzberg", "pypdf"]
    single = _extract(client, docs / "pdf/unstructured__list-item-example.pdf", "?engine=pypdf").json()
    assert (single["engine"], single["results"]) == ("pypdf", None)


@pytest.mark.parametrize(
    ("query", "fields", "fragment"),
    [
        ("?engine=pypdf", {"engine": "kreuzberg"}, "'engine' given more than once"),
        ("?engines=pypdf&engines=kreuzberg", {}, "'engines' given more than once"),
        ("?engine=pypdf", {"engines": "kreuzberg,pypdf"}, "not both"),
        ("?engine=pypdf&surprise=1", {}, "unknown query parameter(s) 'surprise'"),
        # A submitted name is named escaped and cut short, never echoed whole (log lines, bodies).
        (
            "?engine=pypdf&bogus%0A" + "p" * 5000 + "=1",
            {},
            "parameter(s) 'bogus\\n" + "p" * 58 + "'… (5006 characters).",
        ),
    ],
)
def test_a_choice_in_the_query_string_follows_the_form_rules(
    client: TestClient, docs: Path, query: str, fields: dict[str, str], fragment: str
) -> None:
    response = _extract(client, docs / "md/unstructured__simple-table.md", query, **fields)
    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"
    assert fragment in response.json()["error"]


def test_a_failing_engine_is_reported_in_its_row(
    app_client: AppFactory, docs: Path, vision_server: ScriptedVisionServer
) -> None:
    vision_server.script(VisionReply(status=503))
    with app_client(vision_llm_api_base_url=vision_server.base_url) as client:
        response = _extract(client, docs / "pdf/kreuzberg__searchable.pdf", engines="kreuzberg,vision-llm")
    assert response.status_code == 200
    kreuzberg, vision = response.json()["results"]
    assert kreuzberg["error"] is None
    assert vision["documents"] == []
    assert vision["error"]["code"] == "EXTRACTION_FAILED"
    assert vision["error"]["error"].startswith("Document extraction failed: the vision endpoint answered HTTP 503")


def test_extraction_stops_at_ingest_timeout_seconds_like_an_ingest(app_client: AppFactory, docs: Path) -> None:
    # The engine checks the run's deadline between pages; a deadline already past stops it at the first.
    with app_client(ingest_timeout_seconds=1e-9) as client:
        single = _extract(client, docs / "pdf/kreuzberg__searchable.pdf")
        compared = _extract(client, docs / "pdf/kreuzberg__searchable.pdf", engines="kreuzberg,pypdf")
    assert single.status_code == 504
    assert single.json()["code"] == "INGEST_TIMEOUT"
    assert compared.status_code == 200
    assert compared.json()["results"][0]["error"]["code"] == "INGEST_TIMEOUT"


def test_vision_engine_echoes_its_profile(
    app_client: AppFactory, docs: Path, vision_server: ScriptedVisionServer
) -> None:
    vision_server.script(VisionReply(content="Sample PDF\n\nThis is a simple PDF file."))
    with app_client(vision_llm_api_base_url=vision_server.base_url) as client:
        body = _extract(client, docs / "pdf/kreuzberg__searchable.pdf", engine="vision-llm", profile="ocr").json()
    assert (body["engine"], body["profile"]) == ("vision-llm", "ocr")
    [document] = body["documents"]
    assert document["content"] == "Sample PDF\n\nThis is a simple PDF file."
    assert document["meta"]["vision_profile"] == "ocr"
    assert len(vision_server.requests) == 1


def test_vision_endpoint_down_is_500_naming_it(app_client: AppFactory, docs: Path) -> None:
    with app_client(vision_llm_api_base_url="http://127.0.0.1:9/v1") as client:
        response = _extract(client, docs / "pdf/kreuzberg__searchable.pdf", engine="vision-llm")
    assert response.status_code == 500
    body = response.json()
    assert body["code"] == "EXTRACTION_FAILED"
    assert "the vision endpoint is unreachable" in body["error"]
    assert "VISION_LLM_API_BASE_URL" in body["error"]


def test_auto_shows_its_routing_decision(
    app_client: AppFactory, docs: Path, vision_server: ScriptedVisionServer, gotenberg_server: GotenbergStandIn
) -> None:
    vision_server.script(VisionReply(content="```mermaid\nflowchart TD\n  A[Start] --> B[End]\n```"))
    with app_client(vision_llm_api_base_url=vision_server.base_url, gotenberg_url=gotenberg_server.url) as client:
        body = _extract(client, docs / "docx/docling__textbox.docx", engine="auto").json()
    assert (body["engine"], body["profile"], body["route"]) == ("hybrid-diagram", "diagram-topology", "diagram:vector")
    assert "flowchart TD" in body["documents"][0]["content"]
    assert len(gotenberg_server.uploads) == 1


def test_auto_without_a_vision_endpoint_reads_diagrams_with_the_default_engine(client: TestClient, docs: Path) -> None:
    body = _extract(client, docs / "docx/docling__textbox.docx", engine="auto").json()
    assert (body["engine"], body["route"]) == ("kreuzberg", "diagram:vision-unconfigured")
    assert body["characters"] > 0


def test_json_is_415(client: TestClient) -> None:
    assert client.post("/api/v1/extract", json={"x": 1}).status_code == 415
