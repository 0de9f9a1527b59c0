"""``rag ingest`` / ``rag search`` against fake services speaking the real wire format."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rag_cli.client import file_id_for
from rag_cli.commands import collect_files, run_ingest, run_search
from rag_cli.config import Endpoint, ingestion_endpoint, retrieval_endpoint

KEY = "k" * 40


def console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=200, force_terminal=False), buffer


def fake_ingestion(received: list[dict[str, Any]]) -> httpx.ASGITransport:
    async def ingest(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return JSONResponse({"detail": "Invalid API key"}, status_code=401)
        form = await request.form()
        upload = form["file"]
        assert not isinstance(upload, str)
        content = await upload.read()
        fields = {key: value for key, value in form.items() if key != "file"}
        received.append({**fields, "bytes": content})
        if b"broken" in content:
            return JSONResponse(
                {"detail": {"status": False, "error": "Document extraction failed.", "code": "EXTRACTION_FAILED"}},
                status_code=500,
            )
        return JSONResponse(
            {"status": True, "collection_name": fields["collection_name"], "chunks_count": len(content)}
        )

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
            return JSONResponse(
                {"status": False, "error": "Qdrant is unreachable or failed.", "code": "QDRANT_UNAVAILABLE"},
                status_code=503,
            )
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
