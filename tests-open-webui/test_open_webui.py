"""Issue 47's acceptance: a stock Open WebUI 0.12.4, our Function, our loader, our search.

One session (see conftest): `rag dev` with LOADER_INDEX_UPLOADS=true, the scripted upstream, Open
WebUI from its own venv; an admin signs up; a ten-page contract and a scan are uploaded through
Open WebUI (so through our PUT /process) into a knowledge base; a control question is asked
before the Function exists (Open WebUI's own retrieval answers), then the Function is installed
through the API and two questions are asked with the knowledge base attached. Last, with the
Function still global, the contract question is asked of the retrieval agent's own chat endpoint
(Open WebUI's second OpenAI connection, model ``<model>@handbook``) with nothing attached: the
agent searches our ``handbook`` tenant and streams Open WebUI the citations. Each test reads what
Open WebUI stored (``GET /api/v1/chats/{id}``) or what the scripted model was sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from open_webui_support import (
    AGENT_CONNECTION,
    FUNCTION_ID,
    OPEN_WEBUI_VERSION,
    UPSTREAM_CONNECTION,
    Library,
    OpenWebUI,
    RagDev,
    Turn,
    checked,
)
from scenario import (
    CONTRACT_ANSWER_LABEL,
    CONTRACT_ANSWER_PAGE,
    CONTRACT_ANSWER_TEXT,
    CONTRACT_NAME,
    HANDBOOK,
    HANDBOOK_FILE_ID,
    HANDBOOK_FILE_NAME,
    HANDBOOK_NAME,
    SCAN_ANSWER_PAGE,
    SCAN_ANSWER_TEXT,
    SCAN_NAME,
)
from scripted_upstream import ANSWER, EMBEDDING_MODEL, MODEL_ID

# Metadata keys Open WebUI's own index writes on every chunk (routers/retrieval.py
# save_docs_to_vector_db: embedding_config; process_file: created_by). Our /search returns neither.
OPEN_WEBUI_OWN_KEYS = frozenset({"embedding_config", "created_by"})
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

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


def assert_sources_link_highlighted_pages(turn: Turn, rag_dev: RagDev) -> None:
    """Every source of ``turn`` is a PDF's: Open WebUI links it to ``source.url``, our signed link to the page
    of its best passage with the passage highlighted (``GET <ingestion>/api/v1/citations/<token>/page.png``),
    which opens without a key. No passage carries ``file_id``, which Open WebUI would link to its own file
    store instead; each carries its own ``citation_url`` and ``original_url``."""
    sources = turn.assistant.get("sources") or []
    assert sources, f"the assistant message has no sources: {json.dumps(turn.assistant)[:3000]}"
    citations = f"{rag_dev.ingestion_url}/api/v1/citations/"
    for source in sources:
        url = source["source"].get("url")
        assert isinstance(url, str), source["source"]
        assert url.startswith(citations), url
        metadata = source["metadata"]
        assert metadata, dump(turn)
        for meta in metadata:
            assert "file_id" not in meta, meta
            assert meta["citation_url"].startswith(citations), meta
            assert meta["citation_url"].endswith("/page.png"), meta
            assert meta["original_url"].startswith(citations), meta
        # The link is the page of the document's best passage, its first.
        assert url == metadata[0]["citation_url"], source["source"]
        response = httpx.get(url, timeout=60)  # as a browser opens it: no Authorization header
        assert response.status_code == 200, (url, response.text[:2000])
        assert response.headers["content-type"] == "image/png", response.headers
        assert response.content.startswith(PNG_SIGNATURE), response.content[:16]


def model_context(turn: Turn) -> str:
    """Every message text the scripted model was sent (by Open WebUI) for this turn's answer."""
    [request] = turn.model_requests
    return message_texts(request)


def message_texts(request: dict[str, Any]) -> str:
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
    """The stored message cites our search: one source per upload, keyed by its Open WebUI file id
    (``source.id`` = ``metadata.source``, its tenant ``file-<id>``), named as uploaded, 0-based page 2."""
    found = list(passages(contract_turn))
    assert found, f"the assistant message has no sources: {json.dumps(contract_turn.assistant)[:3000]}"
    names = {library.contract["id"]: CONTRACT_NAME, library.scan["id"]: SCAN_NAME}
    for source, _, meta in found:
        assert meta.get("source") in names, f"a source of no uploaded file: {meta}"
        assert meta.get("collection_name") == f"file-{meta['source']}", meta
        assert type(meta.get("page")) is int, meta
        # One source per file, named as it was uploaded (not Open WebUI's storage name <id>_<name>).
        assert source["source"]["id"] == meta["source"], source["source"]
        assert source["source"]["name"] == names[meta["source"]], source["source"]
        assert meta.get("name") == names[meta["source"]], meta
    hits = [meta for _, document, meta in found if CONTRACT_ANSWER_TEXT in document]
    assert hits, f"no source holds {CONTRACT_ANSWER_TEXT!r}: {dump(contract_turn)}"
    assert hits[0]["source"] == library.contract["id"]
    assert hits[0]["page"] == CONTRACT_ANSWER_PAGE
    # The best passage is the answer: its document is the first source, [1] in the answer.
    first = contract_turn.assistant["sources"][0]
    assert first["source"]["id"] == library.contract["id"]
    assert CONTRACT_ANSWER_TEXT in squeeze(first["document"][0]), dump(contract_turn)


def test_the_scan_is_found_by_its_ocr_text(scan_turn: Turn, library: Library) -> None:
    hits = [(source, meta) for source, document, meta in passages(scan_turn) if SCAN_ANSWER_TEXT in document]
    assert hits, f"no source holds {SCAN_ANSWER_TEXT!r}: {dump(scan_turn)}"
    source, meta = hits[0]
    assert meta["source"] == library.scan["id"]
    assert source["source"]["id"] == library.scan["id"], source["source"]
    assert meta["page"] == SCAN_ANSWER_PAGE
    assert SCAN_NAME in (source.get("source") or {}).get("name", ""), source.get("source")


@pytest.mark.parametrize("which", ["contract_turn", "scan_turn"])
def test_a_pdf_source_links_its_highlighted_page(which: str, request: pytest.FixtureRequest, rag_dev: RagDev) -> None:
    """Both uploads are PDFs: each source links the page of its best passage, highlighted (see
    ``assert_sources_link_highlighted_pages``)."""
    assert_sources_link_highlighted_pages(request.getfixturevalue(which), rag_dev)


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


# --- the retrieval agent's chat endpoint as Open WebUI's second OpenAI connection --------------

HANDBOOK_MODEL = f"{MODEL_ID}@{HANDBOOK}"
# The agent's context labels each passage "[n] <file> (page <page + 1>, file_id: <id>)" (chat/context.py).
PASSAGE_HEAD = re.compile(r"^\[(\d+)\] (.+?)(?: \((.*)\))?$")
# What the Function leaves on a message when it runs (its status events, stored in statusHistory).
FUNCTION_STATUS_ACTIONS = frozenset({"knowledge_search", "sources_retrieved"})


def agent_passages(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(head line, text) of every numbered passage in the agent's context message (its "Passages:" block;
    a passage's text has blank lines of its own, so passages are split at their head lines)."""
    found: list[tuple[str, str]] = []
    for message in request.get("messages", []):
        content = message.get("content")
        if message.get("role") != "system" or not isinstance(content, str) or "\nPassages:\n" not in content:
            continue
        body = content.split("\nPassages:\n", 1)[1]
        for block in re.split(r"(?m)^(?=\[\d+\] )", body):
            head, _, text = block.strip().partition("\n")
            if PASSAGE_HEAD.match(head):
                found.append((head, squeeze(text)))
    return found


def test_open_webui_lists_the_handbook_from_the_agent_connection(
    admin: httpx.Client, open_webui_models: list[dict[str, Any]], handbook: dict[str, Any]
) -> None:
    """GET /api/models has <model>@handbook from the agent's connection, named by CHAT_KNOWLEDGE_BASE_NAMES;
    the agent's connection lists no embedding model and no per-file tenant."""
    assert handbook["status"] is True, handbook
    assert handbook["collection_name"] == HANDBOOK, handbook
    assert handbook["chunks_count"] > 0, handbook
    by_id = {model["id"]: model for model in open_webui_models}
    assert HANDBOOK_MODEL in by_id, sorted(by_id)
    assert by_id[HANDBOOK_MODEL]["urlIdx"] == AGENT_CONNECTION, by_id[HANDBOOK_MODEL]
    assert by_id[HANDBOOK_MODEL]["name"] == f"{HANDBOOK_NAME} ({MODEL_ID})", by_id[HANDBOOK_MODEL]
    # A model both connections list stays the first's: the other chats still reach the upstream directly.
    assert by_id[MODEL_ID]["urlIdx"] == UPSTREAM_CONNECTION, by_id[MODEL_ID]
    from_agent = [model["id"] for model in open_webui_models if model.get("urlIdx") == AGENT_CONNECTION]
    assert from_agent == [HANDBOOK_MODEL], from_agent
    # What the agent's connection itself lists, as Open WebUI reads it (routers/openai.py /models/{url_idx}).
    listed = checked(admin.get(f"/openai/models/{AGENT_CONNECTION}"), what="the agent connection's models")
    ids = [model["id"] for model in listed["data"]]
    assert sorted(ids) == sorted([MODEL_ID, HANDBOOK_MODEL]), ids
    assert EMBEDDING_MODEL not in " ".join(ids), ids
    assert not [name for name in ids if "embed" in name.lower() or "@file-" in name], ids


def test_the_agent_chat_stored_our_citations(handbook_turn: Turn) -> None:
    """Streamed through Open WebUI: the answer, and one source per document, the agent's, 0-based page 2."""
    message = handbook_turn.assistant
    assert message["content"] == ANSWER, json.dumps(message)[:3000]
    sources = message.get("sources") or []
    assert len(sources) == 1, f"not one source per document: {dump(handbook_turn)}"
    [source] = sources
    assert source["source"]["id"] == HANDBOOK_FILE_ID, source["source"]
    assert source["source"]["name"] == HANDBOOK_FILE_NAME, source["source"]
    documents, metadata = source["document"], source["metadata"]
    assert documents, dump(handbook_turn)
    assert len(documents) == len(metadata) == len(source["distances"]), dump(handbook_turn)
    for meta in metadata:
        assert meta["source"] == HANDBOOK_FILE_ID, meta
        assert meta["name"] == HANDBOOK_FILE_NAME, meta
        assert meta["collection_name"] == HANDBOOK, meta
        assert meta["citation"] == 1, meta
        assert type(meta["page"]) is int, meta
        assert not OPEN_WEBUI_OWN_KEYS & set(meta), meta
    hits = [
        meta for document, meta in zip(documents, metadata, strict=True) if CONTRACT_ANSWER_TEXT in squeeze(document)
    ]
    assert hits, f"no passage holds {CONTRACT_ANSWER_TEXT!r}: {dump(handbook_turn)}"
    assert {meta["page"] for meta in hits} == {CONTRACT_ANSWER_PAGE}, hits
    # The best passage is the answer's: the first one of the citation [1].
    assert CONTRACT_ANSWER_TEXT in squeeze(documents[0]), dump(handbook_turn)


def test_the_agent_chat_links_the_highlighted_page(handbook_turn: Turn, rag_dev: RagDev) -> None:
    """The agent's source for the contract links the page of its best passage (page 3), highlighted."""
    assert_sources_link_highlighted_pages(handbook_turn, rag_dev)


def test_the_agent_gave_the_model_the_page_as_people_count_it(handbook_turn: Turn) -> None:
    """One upstream call, the agent's: its context labels the answer's passage [1], page 3 (0-based 2)."""
    [request] = handbook_turn.agent_requests
    assert request["model"] == MODEL_ID, request.get("model")
    assert request.get("stream") is True, {key: value for key, value in request.items() if key != "messages"}
    found = agent_passages(request)
    assert found, f"no numbered passage in what the model read: {message_texts(request)[:4000]}"
    heads = [head for head, text in found if CONTRACT_ANSWER_TEXT in text]
    assert heads, f"the answer's passage is not in what the model read: {message_texts(request)[:4000]}"
    assert heads[0] == f"[1] {HANDBOOK_FILE_NAME} (page {CONTRACT_ANSWER_PAGE + 1}, file_id: {HANDBOOK_FILE_ID})", heads
    for head, _ in found:
        match = PASSAGE_HEAD.match(head)
        assert match, head
        # One document: every passage is its citation [1].
        assert (match.group(1), match.group(2)) == ("1", HANDBOOK_FILE_NAME), head


def test_the_function_stayed_out_of_the_agent_chat(
    admin: httpx.Client, handbook_turn: Turn, function: dict[str, Any]
) -> None:
    """The Function was active and global during the chat (``handbook_turn`` needs it), but the chat had no
    files: no status of its own, nothing injected; Open WebUI called the upstream neither for an answer nor
    for an embedding; only the agent did, once."""
    current = checked(admin.get(f"/api/v1/functions/id/{FUNCTION_ID}"), what="the Function")
    assert (current["is_active"], current["is_global"]) == (True, True), current
    user = handbook_turn.chat["chat"]["history"]["messages"][handbook_turn.user_message_id]
    assert not user.get("files"), user.get("files")
    statuses = handbook_turn.assistant.get("statusHistory") or []
    assert not [status for status in statuses if status.get("action") in FUNCTION_STATUS_ACTIONS], statuses
    assert handbook_turn.model_requests == [], "Open WebUI asked the upstream itself"
    assert handbook_turn.embedding_requests == [], "Open WebUI embedded a query: its own retrieval ran"
    [request] = handbook_turn.agent_requests
    context = message_texts(request)
    # Neither the Function's nor Open WebUI's RAG template reached the model: only the agent's passages.
    assert "<context>" not in context, context[:4000]
    assert "<source" not in context, context[:4000]
