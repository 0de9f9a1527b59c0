"""Malformed flags and variables: a usage error (exit 2) naming them, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_cli.__main__ import main


@pytest.mark.parametrize("url", ["http://127.0.0.1:8oo2", "http://[::1"])
@pytest.mark.parametrize(
    "argv",
    [
        ["search", "q", "--collection", "kb"],
        ["ingest", "{file}", "--collection", "kb"],
        ["sync", "{folder}", "--collection", "kb"],
        ["memory", "show", "alice"],
    ],
    ids=["search", "ingest", "sync", "memory"],
)
def test_a_malformed_url_flag_is_a_usage_error(
    url: str, argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.md").write_text("alpha")
    args = [arg.format(file=tmp_path / "a.md", folder=tmp_path) for arg in argv]
    assert main([*args, "--url", url]) == 2
    assert f"rag {args[0]}: --url {url!r} is not a valid URL" in capsys.readouterr().err


def test_a_malformed_url_variable_is_named(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RAG_RETRIEVAL_URL", "http://[::1")
    assert main(["search", "q", "--collection", "kb"]) == 2
    assert "rag search: RAG_RETRIEVAL_URL 'http://[::1' is not a valid URL" in capsys.readouterr().err
    monkeypatch.delenv("RAG_RETRIEVAL_URL")
    monkeypatch.setenv("RAG_INGESTION_URL", "not a url")
    assert main(["mcp"]) == 2
    assert "rag mcp: RAG_INGESTION_URL 'not a url' is not a valid URL" in capsys.readouterr().err
    assert main(["mcp", "--ingestion-url", "http://127.0.0.1:8oo1"]) == 2
    assert "rag mcp: --ingestion-url 'http://127.0.0.1:8oo1' is not a valid URL" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["abc", "8002/tcp"])
def test_a_malformed_port_variable_breaks_only_rag_dev(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RAG_RETRIEVAL_PORT", value)
    with pytest.raises(SystemExit) as exited:
        main(["dev", "--help"])
    assert exited.value.code == 0
    assert "RAG_RETRIEVAL_PORT" in capsys.readouterr().out
    # Another command does not read it (a missing folder is its own usage error).
    assert main(["sync", "/nonexistent/folder", "--collection", "kb"]) == 2
    assert "no such folder" in capsys.readouterr().out
    # rag dev refuses before it starts anything.
    assert main(["dev"]) == 2
    assert f"rag dev: RAG_RETRIEVAL_PORT={value!r} is not a port number" in capsys.readouterr().err


def test_the_log_level_must_be_one_the_services_know(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["dev", "--log-level", "verbose"])
    assert exited.value.code == 2
    assert "invalid choice: 'verbose'" in capsys.readouterr().err
    monkeypatch.setenv("LOG_LEVEL", "verbose")
    assert main(["dev"]) == 2
    assert "rag dev: LOG_LEVEL='verbose' is not one of critical, error, warning, info, debug" in capsys.readouterr().err


def test_the_log_format_must_be_one_the_services_know(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOG_FORMAT", "yaml")
    assert main(["dev"]) == 2
    assert "rag dev: LOG_FORMAT='yaml' is not one of json, text" in capsys.readouterr().err
