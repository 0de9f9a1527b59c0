"""``rag ingest`` / ``rag search`` against fake services speaking the real wire format."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from ingestion_service.api.models import ExtractionInfo, IngestResponse
from rag_cli.client import file_id_for
from rag_cli.commands import collect_files, run_ingest, run_search
from rag_cli.config import Endpoint, ingestion_endpoint, retrieval_endpoint

from .conftest import error_reply, serving  # noqa: TID252

KEY = "k" * 40


def console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=200, force_terminal=False), buffer


def ingested(collection: str, chunks: int) -> JSONResponse:
    """The ingest's 200, as the service sends it (``response_model_exclude_none``)."""
    reply = IngestResponse(collection_name=collection, chunks_count=chunks, extraction=ExtractionInfo(engine="fake"))
    return JSONResponse(reply.model_dump(mode="json", exclude_none=True))


def fake_ingestion(received: list[dict[str, Any]]) -> httpx.ASGITransport:
    async def ingest(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return error_reply(401, "UNAUTHORIZED", "Missing or wrong API key.")
        form = await request.form()
        upload = form["file"]
        assert not isinstance(upload, str)
        content = await upload.read()
        fields = {key: value for key, value in form.items() if key != "file"}
        received.append({**fields, "bytes": content})
        if b"broken" in content:
            return error_reply(500, "EXTRACTION_FAILED", "Document extraction failed.")
        return ingested(str(fields["collection_name"]), len(content))

    return httpx.ASGITransport(app=Starlette(routes=[Route("/api/v1/ingest", ingest, methods=["PUT"])]))


def test_collect_files_expands_folders_and_skips_hidden(tmp_path: Path) -> None:
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / ".git").mkdir()
    for name in ("docs/b.txt", "docs/sub/a.md", "docs/.hidden", "docs/.git/x", "single.pdf"):
        (tmp_path / name).write_text("x")
    found = collect_files([tmp_path / "docs", tmp_path / "single.pdf"])
    assert found == [tmp_path / "docs/b.txt", tmp_path / "docs/sub/a.md", tmp_path / "single.pdf"]
    with pytest.raises(FileNotFoundError):
        collect_files([tmp_path / "missing"])


def test_ingest_sends_open_webui_multipart_fields(tmp_path: Path) -> None:
    (tmp_path / "one.txt").write_text("hello")
    (tmp_path / "two.txt").write_text("world!")
    received: list[dict[str, Any]] = []
    out, buffer = console()
    code = run_ingest(
        Endpoint("http://ingestion", KEY),
        [tmp_path],
        collection="kb-1",
        user_id="me",
        concurrency=2,
        console=out,
        transport=fake_ingestion(received),
    )
    assert code == 0
    by_name = {item["filename"]: item for item in received}
    assert by_name["one.txt"] == {
        "file_id": file_id_for(tmp_path / "one.txt"),
        "filename": "one.txt",
        "collection_name": "kb-1",
        "collection_type": "file",
        "user_id": "me",
        "overwrite": "true",
        "path": "one.txt",
        "bytes": b"hello",
    }
    text = buffer.getvalue()
    assert "2/2 files ok, 11 chunks" in text


def test_ingest_failure_exits_non_zero_with_the_service_error(tmp_path: Path) -> None:
    (tmp_path / "good.txt").write_text("fine")
    (tmp_path / "bad.txt").write_text("broken file")
    out, buffer = console()
    code = run_ingest(
        Endpoint("http://ingestion", KEY),
        [tmp_path],
        collection="kb",
        user_id="u",
        concurrency=1,
        console=out,
        transport=fake_ingestion([]),
    )
    assert code == 1
    text = buffer.getvalue()
    assert "EXTRACTION_FAILED" in text
    assert "Document extraction failed." in text
    assert "1/2 files ok" in text


def test_ingest_wrong_key_is_reported(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    out, buffer = console()
    code = run_ingest(
        Endpoint("http://ingestion", "wrong"),
        [tmp_path / "a.txt"],
        collection="kb",
        user_id="u",
        concurrency=1,
        console=out,
        transport=fake_ingestion([]),
    )
    assert code == 1
    assert "HTTP 401" in buffer.getvalue()


def test_file_id_is_stable_per_path(tmp_path: Path) -> None:
    assert file_id_for(tmp_path / "a") == file_id_for(tmp_path / "." / "a")
    assert file_id_for(tmp_path / "a") != file_id_for(tmp_path / "b")


def fake_retrieval(seen: list[dict[str, Any]]) -> httpx.ASGITransport:
    async def search(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        if body["collection_names"] == ["down"]:
            return error_reply(503, "QDRANT_UNAVAILABLE", "Qdrant is unreachable or failed.")
        return JSONResponse(
            {
                "documents": [["The Eiffel Tower   was\ncompleted in 1889.", "x" * 400]],
                "metadatas": [[{"name": "paris.pdf", "source": "paris.pdf", "page": 3}, {"source": "other.txt"}]],
                "distances": [[0.0328, 0.0161]],
            }
        )

    return httpx.ASGITransport(app=Starlette(routes=[Route("/search", search, methods=["POST"])]))


def test_search_prints_a_readable_table() -> None:
    seen: list[dict[str, Any]] = []
    out, buffer = console()
    code = run_search(
        Endpoint("http://retrieval", KEY),
        "When?",
        collections=["kb-1", "kb-2"],
        k=2,
        console=out,
        transport=fake_retrieval(seen),
    )
    assert code == 0
    assert seen == [{"queries": ["When?"], "collection_names": ["kb-1", "kb-2"], "k": 2}]
    text = buffer.getvalue()
    assert "paris.pdf" in text
    # The stored 0-based page 3 is the fourth page as people count it.
    assert re.search(r"paris\.pdf\s*│\s*4\s*│", text)
    assert "0.0328" in text
    assert "The Eiffel Tower was completed in 1889." in text
    assert "other.txt" in text
    assert "…" in text


def test_search_error_exits_non_zero() -> None:
    out, buffer = console()
    code = run_search(
        Endpoint("http://retrieval", KEY), "q", collections=["down"], k=1, console=out, transport=fake_retrieval([])
    )
    assert code == 1
    assert "QDRANT_UNAVAILABLE" in buffer.getvalue()


def test_endpoints_from_flags_then_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ingestion_endpoint(None, None) == Endpoint("http://127.0.0.1:8001", None)
    monkeypatch.setenv("RAG_RETRIEVAL_URL", "http://r:9/")
    monkeypatch.setenv("RETRIEVAL_API_KEY", "env-key")
    assert retrieval_endpoint(None, None) == Endpoint("http://r:9", "env-key")
    assert retrieval_endpoint("http://flag", "flag-key") == Endpoint("http://flag", "flag-key")
    assert Endpoint("u", "x").headers == {"Authorization": "Bearer x"}


def fake_agentic_retrieval(seen: list[tuple[dict[str, Any], str | None]]) -> httpx.ASGITransport:
    steps = [
        {"tool": "retrieve", "round": 1, "queries": ["Eiffel completion", "When?"], "results": 2, "ms": 12.5},
        {"tool": "read_document", "file_id": "file-paris", "chunks": 4, "results": 1, "ms": 3.0},
    ]

    async def search(request: Request) -> JSONResponse:
        seen.append((await request.json(), request.headers.get("x-rag-debug")))
        headers = {"X-RAG-Agent-Outcome": "answered"}
        if request.headers.get("x-rag-debug") == "steps":
            headers["X-RAG-Agent-Steps"] = json.dumps(steps)
        return JSONResponse(
            {
                "documents": [["The Eiffel Tower was completed in 1889."]],
                "metadatas": [[{"name": "paris.pdf"}]],
                "distances": [[0.91]],
            },
            headers=headers,
        )

    return httpx.ASGITransport(app=Starlette(routes=[Route("/search", search, methods=["POST"])]))


def test_search_agentic_shows_the_agents_steps() -> None:
    seen: list[tuple[dict[str, Any], str | None]] = []
    out, buffer = console()
    code = run_search(
        Endpoint("http://retrieval", KEY),
        "When?",
        collections=["kb-1"],
        k=3,
        agentic=True,
        console=out,
        transport=fake_agentic_retrieval(seen),
    )
    assert code == 0
    assert seen == [({"queries": ["When?"], "collection_names": ["kb-1"], "k": 3}, "steps")]
    text = buffer.getvalue()
    assert "outcome: answered" in text
    assert "retrieve" in text
    assert "Eiffel completion" in text
    assert "read_document" in text
    assert "file-paris" in text
    assert "paris.pdf" in text


def test_search_agentic_json_and_linear_note() -> None:
    out, buffer = console()
    code = run_search(
        Endpoint("http://retrieval", KEY),
        "q",
        collections=["kb-1"],
        k=1,
        agentic=True,
        as_json=True,
        console=out,
        transport=fake_agentic_retrieval([]),
    )
    assert code == 0
    payload = json.loads(buffer.getvalue())
    assert payload["agent"]["outcome"] == "answered"
    assert payload["agent"]["steps"][0]["tool"] == "retrieve"
    assert payload["response"]["documents"] == [["The Eiffel Tower was completed in 1889."]]
    # A linear service sends no agent headers: the command says so and still prints the results.
    out, buffer = console()
    code = run_search(
        Endpoint("http://retrieval", KEY),
        "When?",
        collections=["kb-1"],
        k=2,
        agentic=True,
        console=out,
        transport=fake_retrieval([]),
    )
    assert code == 0
    assert "linear pipeline" in buffer.getvalue()
    assert "paris.pdf" in buffer.getvalue()


def test_ingest_shows_paths_and_errors_with_markup_as_written(tmp_path: Path) -> None:
    (tmp_path / "a[").mkdir()
    (tmp_path / "a[/x].md").write_text("fine")  # "[/x]" closes a tag never opened: rich's MarkupError
    (tmp_path / "[red]b.md").write_text("broken")  # as markup, "[red]" would vanish
    out, buffer = console()
    code = run_ingest(
        Endpoint("http://ingestion", KEY),
        [tmp_path / "a[/x].md", tmp_path / "[red]b.md"],
        collection="kb",
        user_id="u",
        concurrency=1,
        console=out,
        transport=fake_ingestion([]),
    )
    assert code == 1
    text = buffer.getvalue()
    assert "a[/x].md" in text
    assert "[red]b.md" in text
    assert "EXTRACTION_FAILED" in text
    assert "1/2 files ok" in text


def test_ingest_of_a_missing_path_with_markup_is_a_usage_error(tmp_path: Path) -> None:
    out, buffer = console()
    code = run_ingest(
        Endpoint("http://ingestion", KEY),
        [tmp_path / "nope[/x].md"],
        collection="kb",
        user_id="u",
        concurrency=1,
        console=out,
        transport=fake_ingestion([]),
    )
    assert code == 2
    assert f"no such file or folder: {tmp_path / 'nope[/x].md'}" in buffer.getvalue()


def answering(body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.ASGITransport:
    async def search(_: Request) -> JSONResponse:
        return JSONResponse(body, headers=headers)

    return httpx.ASGITransport(app=Starlette(routes=[Route("/search", search, methods=["POST"])]))


def test_search_shows_markup_in_the_query_and_results_as_written() -> None:
    steps = [{"tool": "retrieve", "queries": ["[/red] tags"], "results": 1, "ms": 1.0}]
    transport = answering(
        {
            "documents": [["closing [/red] tag and [bold]x[/bold] here"]],
            "metadatas": [[{"name": "a[/x].md", "page": 1}]],
            "distances": [[0.5]],
        },
        headers={"X-RAG-Agent-Outcome": "[/done]", "X-RAG-Agent-Steps": json.dumps(steps)},
    )
    out, buffer = console()
    code = run_search(
        Endpoint("http://retrieval", KEY),
        "what is [/red]?",
        collections=["kb"],
        k=1,
        agentic=True,
        console=out,
        transport=transport,
    )
    assert code == 0
    text = buffer.getvalue()
    assert "Results for 'what is [/red]?'" in text
    assert "closing [/red] tag and [bold]x[/bold] here" in text
    assert "a[/x].md" in text
    assert "outcome: [/done]" in text
    assert "[/red] tags" in text


def test_search_reports_a_reply_that_is_not_json() -> None:
    async def search(_: Request) -> HTMLResponse:
        return HTMLResponse("<html><body>Open WebUI</body></html>")

    out, buffer = console()
    code = run_search(
        Endpoint("http://retrieval", KEY),
        "q",
        collections=["kb"],
        k=1,
        console=out,
        transport=httpx.ASGITransport(app=Starlette(routes=[Route("/search", search, methods=["POST"])])),
    )
    assert code == 1
    assert "search failed: unexpected reply: <html><body>Open WebUI</body></html>" in buffer.getvalue()


def test_ctrl_c_during_ingest_exits_130_without_a_traceback(tmp_path: Path) -> None:
    uploading, release = threading.Event(), threading.Event()

    async def ingest(_: Request) -> JSONResponse:
        uploading.set()
        while not release.is_set():
            await asyncio.sleep(0.05)
        return ingested("kb", 1)

    (tmp_path / "a.md").write_text("alpha")
    app = Starlette(routes=[Route("/api/v1/ingest", ingest, methods=["PUT"])])
    with serving(app) as url:
        process = subprocess.Popen(
            [sys.executable, "-m", "rag_cli", "ingest", str(tmp_path / "a.md"), "--collection", "kb", "--url", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "INGESTION_API_KEY": KEY},
        )
        try:
            assert uploading.wait(timeout=60), "the upload never arrived"
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=30)
        finally:
            release.set()
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, stderr
    assert "rag ingest: interrupted" in stdout
    assert "Traceback" not in stdout + stderr


def fake_url_ingestion(received: list[dict[str, Any]]) -> Starlette:
    """The ingest route's JSON mode with ``url`` (and multipart uploads), as the service answers them."""

    async def ingest(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return error_reply(401, "UNAUTHORIZED", "Missing or wrong API key.")
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            form = await request.form()
            received.append({key: value for key, value in form.items() if key != "file"})
            return ingested(str(form["collection_name"]), 1)
        body = await request.json()
        received.append(body)
        if "private" in body["url"]:
            return error_reply(422, "URL_NOT_ALLOWED", "The URL's host resolves to a private address.")
        return ingested(body["collection_name"], 3)

    return Starlette(routes=[Route("/api/v1/ingest", ingest, methods=["PUT"])])


def test_rag_ingest_of_a_url_asks_the_service_to_fetch_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag_cli.__main__ import main
    from rag_cli.client import file_id_for_url

    # The double slash and the query must reach the service as typed (a Path would fold "//").
    page = "https://example.com/docs//guide?lang=en"
    (tmp_path / "notes.md").write_text("local notes")
    received: list[dict[str, Any]] = []
    monkeypatch.setenv("INGESTION_API_KEY", KEY)
    with serving(fake_url_ingestion(received)) as url:
        code = main(["ingest", page, str(tmp_path / "notes.md"), "--collection", "kb", "--url", url])
    assert code == 0
    fetched = [body for body in received if "url" in body]
    assert fetched == [
        {
            "url": page,
            "file_id": file_id_for_url(page),
            "collection_name": "kb",
            "collection_type": "file",
            "user_id": "rag-cli",
            "overwrite": True,
        }
    ]
    assert [body["filename"] for body in received if "url" not in body] == ["notes.md"]
    shown = capsys.readouterr().out
    assert page in shown
    assert "2/2 files ok, 4 chunks" in shown


def test_a_refused_url_fails_the_run_with_the_service_error() -> None:
    out, buffer = console()
    code = run_ingest(
        Endpoint("http://ingestion", KEY),
        ["http://private.example/x"],
        collection="kb",
        user_id="u",
        concurrency=1,
        console=out,
        transport=httpx.ASGITransport(app=fake_url_ingestion([])),
    )
    assert code == 1
    text = buffer.getvalue()
    assert "URL_NOT_ALLOWED" in text
    assert "0/1 files ok" in text
