"""Issue 47's acceptance: a stock Open WebUI 0.12.4, our Function, our loader, our search.

One session (see conftest): `rag dev` with LOADER_INDEX_UPLOADS=true, the scripted upstream, Open
WebUI from its own venv; an admin signs up; a ten-page contract and a scan are uploaded through
Open WebUI (so through our PUT /process) into a knowledge base; a control question is asked
before the Function exists (Open WebUI's own retrieval answers), then the Function is installed
through the API and two questions are asked with the knowledge base attached. Each test reads
what Open WebUI stored (``GET /api/v1/chats/{id}``) or what the scripted model was sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from open_webui_support import OPEN_WEBUI_VERSION, Library, OpenWebUI, RagDev, Turn
from scenario import (
    CONTRACT_ANSWER_LABEL,
    CONTRACT_ANSWER_PAGE,
    CONTRACT_ANSWER_TEXT,
    CONTRACT_NAME,
    SCAN_ANSWER_PAGE,
    SCAN_ANSWER_TEXT,
    SCAN_NAME,
)
from scripted_upstream import ANSWER

# Metadata keys Open WebUI's own index writes on every chunk (routers/retrieval.py
# save_docs_to_vector_db: embedding_config; process_file: created_by). Our /search returns neither.
OPEN_WEBUI_OWN_KEYS = frozenset({"embedding_config", "created_by"})

pytestmark = pytest.mark.timeout(1800)


def squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def passages(turn: Turn) -> Iterator[tuple[dict[str, Any], str, dict[str, Any]]]:
    """(source, document, metadata) for every passage of every source of the stored assistant message."""
    for source in turn.assistant.get("sources") or []:
        for document, metadata in zip(source.get("document") or [], source.get("metadata") or [], strict=False):
            yield source, squeeze(document), metadata or {}


def dump(turn: Turn) -> str:
    return json.dumps(turn.assistant.get("sources"), indent=1)[:6000]


def model_context(turn: Turn) -> str:
    """Every message text the scripted model was sent for this turn's answer."""
    [request] = turn.model_requests
    texts: list[str] = []
    for message in request.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [part.get("text", "") for part in content if isinstance(part, dict)]
    return "\n".join(texts)


# --- the setup is what it claims to be -------------------------------------------------------


def test_open_webui_is_stock_0_12_4(open_webui: OpenWebUI) -> None:
    assert open_webui.version == OPEN_WEBUI_VERSION


def test_uploads_were_read_by_our_loader(library: Library) -> None:
    """Open WebUI kept the text our PUT /process extracted: the scan's OCR text included."""
    assert library.contract["data"]["status"] == "completed"
    assert library.scan["data"]["status"] == "completed"
    assert CONTRACT_ANSWER_TEXT in squeeze(library.contract["data"]["content"])
    assert SCAN_ANSWER_TEXT in squeeze(library.scan["data"]["content"])


def test_loader_indexed_each_upload_under_its_file_tenant(library: Library, rag_dev: RagDev) -> None:
    """LOADER_INDEX_UPLOADS: our /search finds each upload under tenant file-<its Open WebUI id>."""
    with rag_dev.retrieval() as client:
        for file, question_text, page in (
            (library.contract, CONTRACT_ANSWER_TEXT, CONTRACT_ANSWER_PAGE),
            (library.scan, SCAN_ANSWER_TEXT, SCAN_ANSWER_PAGE),
        ):
            response = client.post(
                "/search", json={"queries": [question_text], "collection_names": [f"file-{file['id']}"], "k": 3}
            )
            assert response.status_code == 200, response.text
            [documents] = response.json()["documents"]
            [metadatas] = response.json()["metadatas"]
            assert documents, f"nothing indexed under file-{file['id']}"
            assert question_text in squeeze(documents[0])
            assert metadatas[0]["file_id"] == file["id"]
            assert metadatas[0]["page"] == page


# --- the control: without the Function, Open WebUI's own retrieval runs -----------------------


def test_control_without_the_function_open_webui_retrieves_itself(control_turn: Turn) -> None:
    """What the Function's turns must not show: a query embedded during the chat, sources of its own index."""
    assert control_turn.assistant["content"] == ANSWER
    assert control_turn.embedding_requests, "Open WebUI's own retrieval embedded no query"
    # Its query generation asked the model first (retrieval.query_generation is on by default).
    assert len(control_turn.model_requests) == 2, [request.get("messages") for request in control_turn.model_requests]
    own = [meta for _, _, meta in passages(control_turn) if OPEN_WEBUI_OWN_KEYS & set(meta)]
    assert own, f"no source of Open WebUI's own index: {dump(control_turn)}"


# --- with the Function ------------------------------------------------------------------------


def test_function_is_an_active_global_filter(function: dict[str, Any]) -> None:
    assert function["function"]["type"] == "filter"
    assert function["function"]["is_active"] is True
    assert function["function"]["is_global"] is True


def test_the_answer_was_stored(contract_turn: Turn, scan_turn: Turn) -> None:
    assert contract_turn.assistant["content"] == ANSWER
    assert scan_turn.assistant["content"] == ANSWER


def test_sources_are_ours_with_the_right_0_based_page(contract_turn: Turn, library: Library) -> None:
    """The stored message cites our search: Open WebUI's file ids, the uploads' names, 0-based page 2."""
    found = list(passages(contract_turn))
    assert found, f"the assistant message has no sources: {json.dumps(contract_turn.assistant)[:3000]}"
    names = {library.contract["id"]: CONTRACT_NAME, library.scan["id"]: SCAN_NAME}
    for source, _, meta in found:
        assert meta.get("file_id") in names, f"a source of no uploaded file: {meta}"
        assert type(meta.get("page")) is int, meta
        # One source per file, named as it was uploaded (not Open WebUI's storage name <id>_<name>).
        assert source["source"]["id"] == meta["file_id"], source["source"]
        assert source["source"]["name"] == names[meta["file_id"]], source["source"]
        assert meta.get("name") == names[meta["file_id"]], meta
    hits = [meta for _, document, meta in found if CONTRACT_ANSWER_TEXT in document]
    assert hits, f"no source holds {CONTRACT_ANSWER_TEXT!r}: {dump(contract_turn)}"
    assert hits[0]["file_id"] == library.contract["id"]
    assert hits[0]["page"] == CONTRACT_ANSWER_PAGE
    # The best passage is the answer: its document is the first source, [1] in the answer.
    first = contract_turn.assistant["sources"][0]
    assert first["source"]["id"] == library.contract["id"]
    assert CONTRACT_ANSWER_TEXT in squeeze(first["document"][0]), dump(contract_turn)


def test_the_scan_is_found_by_its_ocr_text(scan_turn: Turn, library: Library) -> None:
    hits = [(source, meta) for source, document, meta in passages(scan_turn) if SCAN_ANSWER_TEXT in document]
    assert hits, f"no source holds {SCAN_ANSWER_TEXT!r}: {dump(scan_turn)}"
    source, meta = hits[0]
    assert meta["file_id"] == library.scan["id"]
    assert meta["page"] == SCAN_ANSWER_PAGE
    assert SCAN_NAME in (source.get("source") or {}).get("name", ""), source.get("source")


@pytest.mark.parametrize("which", ["contract_turn", "scan_turn"])
def test_open_webui_own_retrieval_did_not_run(which: str, request: pytest.FixtureRequest) -> None:
    """No query embedded, no query-generation call (one model call: the answer), no source of its own index."""
    turn: Turn = request.getfixturevalue(which)
    assert turn.embedding_requests == [], "Open WebUI embedded a query: its own retrieval ran"
    assert len(turn.model_requests) == 1, [request.get("messages") for request in turn.model_requests]
    own = [meta for _, _, meta in passages(turn) if OPEN_WEBUI_OWN_KEYS & set(meta)]
    assert own == [], f"sources from Open WebUI's own index: {own}"


def test_the_model_context_labels_the_page_as_people_count_it(contract_turn: Turn) -> None:
    """The passage with the answer reaches the model labelled page 3 (its 0-based page is 2)."""
    context = model_context(contract_turn)
    # The passages sit in the RAG template's <context> block (its instructions mention <source> too).
    assert "<context>" in context, context[:4000]
    block = context.rsplit("<context>", 1)[1].split("</context>", 1)[0]
    tags = re.findall(r"<source\s([^>]*)>(.*?)</source>", block, re.DOTALL)
    assert tags, f"no <source> passage in what the model read: {context[:4000]}"
    labels = [attributes for attributes, text in tags if CONTRACT_ANSWER_TEXT in squeeze(text)]
    assert labels, f"the answer's passage is not in what the model read: {context[:4000]}"
    for attributes in labels:
        assert f'name="{CONTRACT_NAME}"' in attributes, attributes
        assert re.search(CONTRACT_ANSWER_LABEL, attributes), attributes
        assert f'page="{CONTRACT_ANSWER_PAGE}"' not in attributes, attributes
    # The answer's document is numbered first, so "[1]" in the scripted answer cites it.
    assert re.search(r'\bid="1"', labels[0]), labels[0]
