"""The memory service's background reconciliation through /v1/chat/completions, against a scripted
upstream: what a failed model call leaves in the logs."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rag_runtime.store import ChunkStore
from retrieval_agent.memory.reconcile import EXTRACT_TOOL

from ..chat.chat_support import chat_settings  # noqa: TID252
from ..conftest import AUTH  # noqa: TID252
from ..scripted_llm import Reply, ScriptedLLM, Status, text  # noqa: TID252
from .memory_script import tool_names  # noqa: TID252

ECHO = "ECHOED-USER-TEXT I use pip for packaging. Authorization: Bearer sk-upstream-0123456789abcdef"


def test_a_failed_reconciliation_logs_the_status_not_the_upstream_body(
    serve: Callable[[Any], str],
    app_factory: Callable[..., TestClient],
    seeded: ChunkStore,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def script(body: dict[str, Any]) -> Reply:
        if EXTRACT_TOOL in tool_names(body):
            return Status(400, json.dumps({"error": {"message": ECHO}}))
        return text("Noted.")

    llm = ScriptedLLM(script)
    settings = chat_settings(f"{serve(llm.app())}/v1", enable_memory=True, memory_path=tmp_path / "memory")
    client = app_factory(settings, seeded)
    with caplog.at_level(logging.DEBUG, logger="retrieval_agent"):
        chat = {"model": "scripted", "messages": [{"role": "user", "content": "I use pip for packaging."}]}
        response = client.post("/v1/chat/completions", json={**chat, "user": "alice"}, headers=AUTH)
        assert response.status_code == 200, response.text
        # Reading the memory waits for the turn's reconciliation.
        listed = client.get("/api/v1/memory/alice/facts", headers=AUTH)
        assert listed.status_code == 200, listed.text
        assert listed.json()["facts"] == []
    assert 'memory_reconciliations_total{outcome="model_error"} 1.0' in client.get("/metrics", headers=AUTH).text
    ours = [record for record in caplog.records if record.name.startswith("retrieval_agent.memory")]
    warnings = [record.getMessage() for record in ours if record.levelno >= logging.WARNING]
    assert warnings == [
        "memory: reconciliation skipped, the model failed: "
        "ReconcileUnavailableError from ModelRequestRejectedError (HTTP 400)"
    ]
    details = [record for record in ours if "ECHOED-USER-TEXT" in record.getMessage()]
    assert details, "the body is kept at DEBUG"
    assert all(record.levelno == logging.DEBUG for record in details)
    assert all("sk-upstream" not in record.getMessage() for record in details)
