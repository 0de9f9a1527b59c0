"""kreuzberg-http and tika against scripted HTTP servers (httpx.MockTransport)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from ingestion_service.documents import SourceFile
from ingestion_service.documents.kreuzberg_http import KreuzbergHttpConverter
from ingestion_service.documents.tika import TikaConverter
from ingestion_service.errors import ExtractionError
from ingestion_service.runtime import ServiceHooks

if TYPE_CHECKING:
    from ..conftest import AppFactory, MakeSettings, Points, Upload  # noqa: TID252


def _source(tmp_path: Path) -> SourceFile:
    path = tmp_path / "source.md"
    path.write_text("# Title\n\nbody")
    return SourceFile(path=path, filename="doc.md")


def kreuzberg_server(
    status: int = 201, payload: object | None = None, seen: list[httpx.Request] | None = None
) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        assert request.url.path == "/extract"
        body = (
            payload
            if payload is not None
            else [
                {
                    "content": "# Heading\n\nSidecar text about ducks.",
                    "mime_type": "text/markdown",
                    "metadata": {"title": "Ducks", "authors": "Ann"},
                    "detected_languages": ["eng"],
                }
            ]
        )
        return httpx.Response(status, json=body)

    return httpx.MockTransport(handler)


def test_kreuzberg_http_success(make_test_settings: MakeSettings, tmp_path: Path) -> None:
    seen: list[httpx.Request] = []
    converter = KreuzbergHttpConverter(make_test_settings(), transport=kreuzberg_server(seen=seen))
    [document] = converter.convert(_source(tmp_path))
    assert document.content is not None
    assert document.content.startswith("# Heading")
    assert document.meta == {"title": "Ducks", "authors": ["Ann"], "languages": ["en"], "mime_type": "text/markdown"}
    body = seen[0].content
    assert b'name="files"; filename="doc.md"' in body
    assert b'"output_format": "markdown"' in body


def test_kreuzberg_http_sends_code_as_plain_text_and_keeps_its_lines(
    make_test_settings: MakeSettings, tmp_path: Path
) -> None:
    seen: list[httpx.Request] = []
    joined = [{"content": "def f(): return 1", "mime_type": "text/plain", "detected_languages": ["eng"]}]
    converter = KreuzbergHttpConverter(make_test_settings(), transport=kreuzberg_server(payload=joined, seen=seen))
    path = tmp_path / "source.txt"  # how the content check stages a .py file
    path.write_text("def f():\n    return 1\n")
    [document] = converter.convert(SourceFile(path=path, filename="tool.py"))
    assert document.content == "```python\ndef f():\n    return 1\n```"
    assert document.meta == {"languages": ["en"], "mime_type": "text/plain", "reader": "verbatim"}
    # kreuzberg refuses text/x-python; as text/plain it reads the file and detects its language.
    assert b'filename="source.txt"\r\nContent-Type: text/plain' in seen[0].content


@pytest.mark.parametrize(
    ("status", "payload", "document_problem"),
    [
        (422, {"error": "bad"}, True),
        (500, {"error": "x"}, False),
        (201, {"unexpected": True}, False),
        (201, [{"content": 3}], False),
    ],
)
def test_kreuzberg_http_failures(
    make_test_settings: MakeSettings, tmp_path: Path, status: int, payload: object, document_problem: bool
) -> None:
    converter = KreuzbergHttpConverter(make_test_settings(), transport=kreuzberg_server(status, payload))
    with pytest.raises(ExtractionError) as caught:
        converter.convert(_source(tmp_path))
    assert caught.value.document_problem is document_problem


def test_kreuzberg_http_unreachable(make_test_settings: MakeSettings, tmp_path: Path) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    converter = KreuzbergHttpConverter(make_test_settings(), transport=httpx.MockTransport(refuse))
    with pytest.raises(ExtractionError) as caught:
        converter.convert(_source(tmp_path))
    assert caught.value.status_code == 500


def tika_server(status: int = 200, payload: object | None = None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.method == "PUT"
        assert request.url.path == "/rmeta/text"
        assert request.read() == b"# Title\n\nbody"
        body = (
            payload
            if payload is not None
            else [
                {
                    "X-TIKA:content": "Tika text",
                    "dc:title": "T",
                    "dc:creator": ["A", "B"],
                    "language": "da",
                    "Content-Type": "text/plain; charset=UTF-8",
                }
            ]
        )
        return httpx.Response(status, content=json.dumps(body).encode(), headers={"Content-Type": "application/json"})

    return httpx.MockTransport(handler)


def test_tika_success(make_test_settings: MakeSettings, tmp_path: Path) -> None:
    [document] = TikaConverter(make_test_settings(), transport=tika_server()).convert(_source(tmp_path))
    assert document.content == "Tika text"
    assert document.meta == {"title": "T", "authors": ["A", "B"], "languages": ["da"], "mime_type": "text/plain"}


@pytest.mark.parametrize(("status", "document_problem"), [(415, True), (422, True), (503, False)])
def test_tika_failures(make_test_settings: MakeSettings, tmp_path: Path, status: int, document_problem: bool) -> None:
    converter = TikaConverter(make_test_settings(), transport=tika_server(status, {"error": "x"}))
    with pytest.raises(ExtractionError) as caught:
        converter.convert(_source(tmp_path))
    assert caught.value.document_problem is document_problem


def test_ingest_through_the_sidecar_engine(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, make_test_settings: MakeSettings
) -> None:
    converter = KreuzbergHttpConverter(make_test_settings(), transport=kreuzberg_server())
    hooks = ServiceHooks(converter_factories={"kreuzberg-http": lambda _settings: converter})
    with app_client(hooks=hooks, extraction_engine="kreuzberg-http") as client:
        response = upload(client, docs / "md/unstructured__simple-table.md", file_id="side")
        assert response.status_code == 200, response.text
        assert response.json()["extraction"]["engine"] == "kreuzberg-http"
        [record] = points(client, file_id="side")
        assert record.payload["content"].endswith("Sidecar text about ducks.")
        assert record.payload["meta"]["headers"] == ["Heading"]
        assert record.payload["meta"]["title"] == "Ducks"


class ClosingTransport(httpx.MockTransport):
    """A scripted server that records when its client closes the connection pool."""

    closed = False

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("engine", ["tika", "kreuzberg-http"])
def test_the_app_closes_the_engines_http_clients_at_shutdown(
    app_client: AppFactory, make_test_settings: MakeSettings, engine: str
) -> None:
    if engine == "tika":
        transport = ClosingTransport(tika_server().handler)
        converter: TikaConverter | KreuzbergHttpConverter = TikaConverter(make_test_settings(), transport=transport)
    else:
        transport = ClosingTransport(kreuzberg_server().handler)
        converter = KreuzbergHttpConverter(make_test_settings(), transport=transport)
    hooks = ServiceHooks(converter_factories={engine: lambda _settings: converter})
    with app_client(hooks=hooks) as client:
        # The probe builds the engine through the registry, as an ingest would.
        response = client.post(
            "/api/v1/extract", data={"engine": engine}, files={"file": ("doc.md", b"# Title\n\nbody")}
        )
        assert response.status_code == 200, response.text
        assert transport.closed is False
    assert transport.closed is True
