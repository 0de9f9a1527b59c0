"""Agentic /search black-box: a real `rag dev` process with ENABLE_AGENTIC_RAG=true and a scripted model.

The model is `scripted_llm_server.py` on loopback; a marker in the question picks its behaviour.
Documents go in through the real ingest API, in small overlapping token chunks, so read_document
has to put a document back together.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from integration_support import Stack, ingest_multipart, running_rag_dev
from scripted_llm_server import ScriptedLLMServer

AGENT_KEY = "scripted-agent-key-never-logged-0123456789"
HANDBOOK = (
    "Staff handbook of the harbour office. New employees receive a laptop on their first day, and the IT desk on "
    "the second floor sets up accounts for email, calendar and the document archive. Holiday requests go to "
    "your manager at least three weeks ahead through the HR portal, and approved holidays appear in the shared "
    "calendar. The canteen opens at half past eleven and closes at half past one; on Fridays it serves fish. "
    "Bicycles are parked in the basement, never in the corridors or by the main entrance. Fire drills happen "
    "twice a year, and everyone leaves by the nearest stairway, not the lift, and gathers on the quay. Expense "
    "reports are filed within thirty days with the receipts attached, or they are returned unpaid. Visitors "
    "sign in at the reception and wear a badge at all times. The annual staff party is held in December at the "
    "harbour hall, and partners are welcome. Questions about this handbook go to the office manager."
)
TIDES = (
    "Tide tables for the inner harbour. High water on Monday is at six in the morning and half past six in the "
    "evening. Ships longer than ninety metres wait for high water before entering the lock."
)
SECRET = "The vault combination of tenant B is 4711-0815; tenant A must never see it."


@dataclass
class AgenticStack:
    retrieval: httpx.Client
    ingestion: httpx.Client
    llm: ScriptedLLMServer
    tenant: str
    other: str
    log: Path


@pytest.fixture(scope="module")
def agentic(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgenticStack]:
    if os.environ.get("INGESTION_BASE_URL"):
        pytest.skip("starts its own agentic `rag dev` with a scripted model on loopback")
    workdir = tmp_path_factory.mktemp("agentic")
    with ScriptedLLMServer(hang_seconds=6.0) as llm:
        env = {
            "ENABLE_AGENTIC_RAG": "true",
            "AGENT_API_BASE_URL": llm.url,
            "AGENT_API_KEY": AGENT_KEY,
            "AGENT_MODEL": "scripted",
            "AGENT_MAX_ITERATIONS": "2",
            "AGENT_TIMEOUT": "2",
            "CHUNK_SPLIT_BY": "token",
            "CHUNK_SIZE": "48",
            "CHUNK_OVERLAP": "12",
            "CHUNK_MIN_SIZE": "0",
        }
        with running_rag_dev(workdir, stack.s3, env) as running:
            ingestion, retrieval = running.ingestion(), running.retrieval()
            tenant, other = f"agentic-a-{secrets.token_hex(3)}", f"agentic-b-{secrets.token_hex(3)}"
            for name, content, file_id, collection in [
                ("handbook.txt", HANDBOOK, "file-handbook", tenant),
                ("tides.txt", TIDES, "file-tides", tenant),
                ("vault.txt", SECRET, "file-vault", other),
            ]:
                path = workdir / name
                path.write_text(content, encoding="utf-8")
                ingest_multipart(ingestion, path, file_id, collection)
            assert running.log is not None
            yield AgenticStack(retrieval, ingestion, llm, tenant, other, running.log)


def search(stack: AgenticStack, question: str, *, k: int = 4, debug: bool = False) -> httpx.Response:
    response = stack.retrieval.post(
        "/search",
        json={
            "queries": [question],
            "messages": [{"role": "user", "content": question}],
            "collection_names": [stack.tenant],
            "k": k,
        },
        headers={"X-RAG-Debug": "steps"} if debug else None,
    )
    assert response.status_code == 200, response.text
    return response


def metric(stack: AgenticStack, line_start: str) -> float:
    for line in stack.retrieval.get("/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def documents(response: httpx.Response) -> list[str]:
    data: dict[str, Any] = response.json()
    assert len(data["documents"]) == len(data["metadatas"]) == len(data["distances"]) == 1
    return [str(text) for text in data["documents"][0]]


def test_tool_call_returns_sources(agentic: AgenticStack) -> None:
    response = search(agentic, "When does the canteen open?", debug=True)
    assert response.headers["X-RAG-Agent-Outcome"] == "answered"
    found = documents(response)
    assert any("canteen opens" in text for text in found)
    assert {meta["collection_name"] for meta in response.json()["metadatas"][0]} == {agentic.tenant}
    assert '"tool":"retrieve"' in response.headers["X-RAG-Agent-Steps"]
    assert agentic.llm.authorizations[-1] == f"Bearer {AGENT_KEY}"


def test_plain_text_queries_run_a_direct_search(agentic: AgenticStack) -> None:
    response = search(agentic, "[plain] tide tables high water")
    assert response.headers["X-RAG-Agent-Outcome"] == "plain_text"
    assert any("High water" in text for text in documents(response))


def test_a_model_that_loops_forever_is_capped(agentic: AgenticStack) -> None:
    before = len(agentic.llm.requests)
    response = search(agentic, "[loop] fire drills")
    assert response.headers["X-RAG-Agent-Outcome"] == "iteration_cap"
    assert documents(response)
    assert len(agentic.llm.requests) - before == 3  # AGENT_MAX_ITERATIONS=2 rounds, the third call stops it


def test_a_model_that_hangs_returns_what_was_retrieved(agentic: AgenticStack) -> None:
    response = search(agentic, "[hang] expense reports receipts")
    assert response.headers["X-RAG-Agent-Outcome"] == "timeout"
    assert any("Expense" in text for text in documents(response))


def test_a_model_that_is_down_falls_back_to_linear(agentic: AgenticStack) -> None:
    before = metric(agentic, 'agent_fallbacks_total{reason="model_unreachable"}')
    response = search(agentic, "[down] visitors badge reception")
    assert response.headers["X-RAG-Agent-Outcome"] == "fallback"
    assert response.headers["X-RAG-Agent-Fallback"] == "model_unreachable"
    assert any("Visitors" in text for text in documents(response))
    assert metric(agentic, 'agent_fallbacks_total{reason="model_unreachable"}') == before + 1


def test_a_tool_call_naming_another_collection_reads_nothing_outside(agentic: AgenticStack) -> None:
    before = metric(agentic, "agent_tenant_violations_total")
    response = search(agentic, f"[foreign:{agentic.other}:file-vault] vault combination", k=10)
    assert response.headers["X-RAG-Agent-Outcome"] == "answered"
    assert not any("4711" in text for text in documents(response))
    assert {meta["collection_name"] for meta in response.json()["metadatas"][0]} <= {agentic.tenant}
    assert metric(agentic, "agent_tenant_violations_total") == before + 2  # the argument, and the file


def test_read_document_returns_the_whole_document_as_one_source(agentic: AgenticStack) -> None:
    response = search(agentic, "[read] summarise the staff handbook", k=3)
    assert response.headers["X-RAG-Agent-Outcome"] == "answered"
    found = documents(response)
    # Rebuilt from its overlapping chunks, in order, each overlap once.
    assert " ".join(found[0].split()) == " ".join(HANDBOOK.split())
    assert response.json()["metadatas"][0][0]["name"] == "handbook.txt"
    assert sum(1 for text in found if "canteen" in text) == 1


def test_list_documents_then_read_the_newest(agentic: AgenticStack) -> None:
    response = search(agentic, "[list] what was added last?", k=2, debug=True)
    steps = response.headers["X-RAG-Agent-Steps"]
    assert '"tool":"list_documents"' in steps
    assert '"tool":"read_document"' in steps
    assert documents(response)[0] == TIDES  # ingested after the handbook


def test_one_agent_run_line_per_request_and_no_key_in_the_log(agentic: AgenticStack) -> None:
    search(agentic, "bicycles basement")
    log = agentic.log.read_text(encoding="utf-8", errors="replace")
    # `rag dev` writes text lines: the message, then the record's fields as key=value.
    assert "agent_run outcome=answered" in log
    assert "tokens_in=" in log
    assert "model_ms=" in log
    assert AGENT_KEY not in log
