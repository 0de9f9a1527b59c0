"""The Open WebUI Function (integrations/open-webui/rag_search_filter.py) against a real `rag dev`.

The Function is loaded the way Open WebUI 0.12.4 loads one (utils/plugin.py
load_function_module_by_id: the import rewrite, then exec of the source in a fresh module) and its
inlet is called with the arguments utils/filter.py passes: the chat body, ``__user__`` (the user's
model_dump) and ``__event_emitter__``. Open WebUI itself is not installed here, so the three
Open WebUI lookups the Function makes (the user, a knowledge base's files, the access filter) are
stand-ins with 0.12.4's signatures; the retrieval agent and ingestion service are real.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import os
import re
import secrets
import sys
import time
import types
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from integration_support import FIXTURES, REPO_ROOT, Stack, free_port, running_rag_dev

from shared_contract.citations import CITATIONS_PATH, verify_link

FUNCTION_PATH = REPO_ROOT / "integrations" / "open-webui" / "rag_search_filter.py"
PDF = FIXTURES / "unstructured__multi-column-2p.pdf"
PDF_NAME = "Dense Passage Retrieval.pdf"
TEXT = FIXTURES / "tika__danish_europarl_sample.txt"
TEXT_NAME = "europarl.txt"
# On the PDF's second page only (test_pages checks the fixture): the top passage must be page 1.
QUESTION = "Where was the 8th Dalai Lama born?"
# The stack that signs citation links: its key, and the ingestion URL the links name (never opened here).
CITATION_KEY = secrets.token_urlsafe(32)
CITATION_BASE_URL = "https://ingest.example.org"
CITATION_TTL_SECONDS = 7 * 24 * 3600
USER = {
    "id": "user-1",
    "email": "a@example.org",
    "name": "A",
    "role": "user",
    "last_active_at": 1,
    "updated_at": 1,
    "created_at": 1,
}


def load_function(path: Path) -> Any:
    """As utils/plugin.py does: frontmatter, replace_imports, exec in a new module, ``Filter()``."""
    content = path.read_text(encoding="utf-8")
    rewritten = content
    for old, new in {
        "from utils": "from open_webui.utils",
        "from apps": "from open_webui.apps",
        "from main": "from open_webui.main",
        "from config": "from open_webui.config",
    }.items():
        rewritten = rewritten.replace(old, new)
    assert rewritten == content, "Open WebUI would rewrite parts of the file on import"
    module_name = f"function_rag_search_{uuid.uuid4().hex}"
    module = types.ModuleType(module_name)
    sys.modules[module_name] = module
    try:
        module.__dict__["__file__"] = str(path)
        exec(compile(content, str(path), "exec"), module.__dict__)
    finally:
        sys.modules.pop(module_name, None)
    return module


def frontmatter(content: str) -> dict[str, str]:
    """utils/plugin.py extract_frontmatter."""
    lines = content.splitlines()
    assert lines[0].strip() == '"""'
    found: dict[str, str] = {}
    for line in lines[1:]:
        if '"""' in line:
            break
        if match := re.match(r"^\s*([a-z_]+):\s*(.*)\s*$", line, re.IGNORECASE):
            found[match.group(1).strip()] = match.group(2).strip()
    return found


class FakeOpenWebUI:
    """The Open WebUI lookups the Function makes, with 0.12.4's names and signatures."""

    def __init__(self) -> None:
        self.knowledge_files: dict[str, list[str]] = {}
        self.denied: set[str] = set()
        self.checked: list[set[str]] = []

    async def get_user_by_id(self, user_id: str) -> SimpleNamespace | None:
        return SimpleNamespace(id=user_id, role="user") if user_id == USER["id"] else None

    async def get_file_metadatas_by_id(self, knowledge_id: str) -> list[SimpleNamespace]:
        return [SimpleNamespace(id=file_id, meta={}) for file_id in self.knowledge_files.get(knowledge_id, [])]

    async def filter_accessible_collections(self, collection_names: set[str], user: Any) -> set[str]:
        self.checked.append(set(collection_names))
        return collection_names - self.denied


@pytest.fixture
def open_webui(monkeypatch: pytest.MonkeyPatch) -> FakeOpenWebUI:
    fake = FakeOpenWebUI()
    modules: dict[str, dict[str, Any]] = {
        "open_webui": {},
        "open_webui.models": {},
        "open_webui.models.users": {"Users": SimpleNamespace(get_user_by_id=fake.get_user_by_id)},
        "open_webui.models.knowledge": {
            "Knowledges": SimpleNamespace(get_file_metadatas_by_id=fake.get_file_metadatas_by_id)
        },
        "open_webui.retrieval": {},
        "open_webui.retrieval.utils": {"filter_accessible_collections": fake.filter_accessible_collections},
    }
    install_modules(monkeypatch, modules)
    return fake


def install_modules(monkeypatch: pytest.MonkeyPatch, modules: dict[str, dict[str, Any]]) -> None:
    """Stand-in modules under Open WebUI's import paths, gone when the test ends."""
    for name, attributes in modules.items():
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        monkeypatch.setitem(sys.modules, name, module)


@pytest.fixture(scope="module")
def corpus(stack: Stack) -> Iterator[dict[str, str]]:
    with ingested_corpus(stack) as ids:
        yield ids


@pytest.fixture(scope="module")
def linked(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, dict[str, str]]]:
    """A `rag dev` of its own whose retrieval agent signs citation links, and the corpus in it."""
    if os.environ.get("INGESTION_BASE_URL"):
        pytest.skip("starts its own `rag dev` that signs citation links")
    env = {"CITATION_SIGNING_KEY": CITATION_KEY, "CITATION_BASE_URL": CITATION_BASE_URL}
    with (
        running_rag_dev(tmp_path_factory.mktemp("citations"), stack.s3, env) as running,
        ingested_corpus(running) as ids,
    ):
        yield running, ids


@contextmanager
def ingested_corpus(stack: Stack) -> Iterator[dict[str, str]]:
    """A knowledge base ingested by the fork (its tenant is the KB id) and a file indexed the way
    the loader indexes an upload (tenant ``file-<id>``), deleted after."""
    ids = {"kb": str(uuid.uuid4()), "pdf": str(uuid.uuid4()), "text": str(uuid.uuid4())}
    client = stack.ingestion()
    for path, name, file_id, tenant in (
        (PDF, PDF_NAME, ids["pdf"], ids["kb"]),
        (TEXT, TEXT_NAME, ids["text"], f"file-{ids['text']}"),
    ):
        with path.open("rb") as handle:
            response = client.put(
                "/api/v1/ingest",
                files={"file": (name, handle)},
                data={
                    "file_id": file_id,
                    "filename": name,
                    "collection_name": tenant,
                    "collection_type": "file",
                    "user_id": USER["id"],
                    "overwrite": "true",
                },
            )
        assert response.status_code == 200, response.text
    yield ids
    for file_id in (ids["pdf"], ids["text"]):
        assert client.delete(f"/api/v1/documents/{file_id}").status_code == 200


def chat_body(corpus: dict[str, str], question: str) -> dict[str, Any]:
    """A chat request as it reaches the inlet in 0.12.4: ``files`` and ``metadata.files`` are one list
    (main.py builds metadata with ``form_data.get('files')``)."""
    files = [
        # The knowledge picker's row (KnowledgeAccessResponse) with type "collection": no file list.
        {
            "id": corpus["kb"],
            "user_id": USER["id"],
            "name": "Papers",
            "description": "",
            "meta": None,
            "access_grants": [],
            "created_at": 1,
            "updated_at": 1,
            "file_count": 1,
            "write_access": True,
            "type": "collection",
        },
        # An upload: type "file", its id, and its Open WebUI collection name.
        {
            "type": "file",
            "id": corpus["text"],
            "name": TEXT_NAME,
            "url": f"/api/v1/files/{corpus['text']}",
            "collection_name": f"file-{corpus['text']}",
            "status": "uploaded",
            "size": 22287,
            "file": {"id": corpus["text"], "filename": TEXT_NAME, "meta": {"name": TEXT_NAME}},
        },
        # Not ours to serve: a note stays with Open WebUI.
        {"type": "note", "id": "note-1", "name": "My note"},
    ]
    return {
        "model": "llama3",
        "stream": True,
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": question},
        ],
        "files": files,
        "metadata": {
            "user_id": USER["id"],
            "chat_id": "chat-1",
            "message_id": "msg-2",
            "session_id": "s-1",
            "files": files,
            "filter_ids": [],
            "features": {},
        },
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def __call__(self, event: dict[str, Any]) -> None:
        self.events.append(copy.deepcopy(event))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event["data"] for event in self.events if event["type"] == kind]


def new_filter(stack: Stack, **valves: Any) -> Any:
    function = load_function(FUNCTION_PATH).Filter()
    # utils/filter.py apply_filter_valves: Valves(**stored) set on the instance before each call.
    function.valves = function.Valves(
        **{"retrieval_url": stack.retrieval_url, "api_key": stack.retrieval_key, **valves}
    )
    return function


def test_the_file_is_a_filter_open_webui_can_import() -> None:
    content = FUNCTION_PATH.read_text(encoding="utf-8")
    meta = frontmatter(content)
    assert {"title", "version", "required_open_webui_version"} <= set(meta)
    module = load_function(FUNCTION_PATH)
    assert not hasattr(module, "Pipe")  # plugin.py picks the first of Pipe, Filter, Action
    valves = module.Filter.Valves()
    assert (valves.k, valves.mode, valves.priority) == (8, "default", 0)
    # file_handler would make Open WebUI drop every attachment, the note too (utils/filter.py).
    assert not getattr(module.Filter(), "file_handler", False)


def test_inlet_answers_from_search_with_numbered_citations(
    stack: Stack, corpus: dict[str, str], open_webui: FakeOpenWebUI
) -> None:
    open_webui.knowledge_files[corpus["kb"]] = [corpus["pdf"]]
    body = chat_body(corpus, QUESTION)
    note = body["files"][2]
    emitter = Recorder()

    out = asyncio.run(new_filter(stack).inlet(body, __user__=dict(USER), __event_emitter__=emitter))

    # Both tenants of the KB (fork ingest, loader-indexed files) and the upload's were checked.
    assert open_webui.checked == [{corpus["kb"], f"file-{corpus['pdf']}", f"file-{corpus['text']}"}]
    # Open WebUI's own retrieval gets only what the Function does not serve.
    assert out["files"] == [note]
    assert out["metadata"]["files"] == [note]

    sources = emitter.of("source")
    assert sources, "no source events"
    keys = [source["source"]["id"] for source in sources]
    assert len(keys) == len(set(keys))  # one event per document
    # A document is its file_id (the PDF's passages name it in metadata.source: `rag dev` signs citation
    # links, and a linked document's metadata has no file_id; see the last test).
    by_file = {source["source"]["id"]: source for source in sources}
    assert set(by_file) <= {corpus["pdf"], corpus["text"]}
    pdf = by_file[corpus["pdf"]]
    assert pdf["source"]["name"] == PDF_NAME
    assert all(meta["name"] == PDF_NAME and meta["source"] == corpus["pdf"] for meta in pdf["metadata"])
    assert len(pdf["document"]) == len(pdf["metadata"]) == len(pdf["distances"])
    # The best passage is the second page's, and it stays 0-based as Open WebUI expects.
    assert sources[0] is pdf
    assert "Dalai Lama" in pdf["document"][0]
    assert pdf["metadata"][0]["page"] == 1
    assert {meta["page"] for meta in pdf["metadata"]} <= {0, 1}

    # The context numbers passages by document in the events' order and counts pages from 1.
    injected = out["messages"][-1]["content"]
    assert out["messages"][-1]["role"] == "user"
    assert injected.endswith(f"\n{QUESTION}")
    assert "<context>" in injected
    tags = re.findall(r'<source id="(\d+)" name="([^"]*)"(?: page="(\d+)")?>(.*?)</source>', injected, re.DOTALL)
    expected = [
        (str(number), meta["name"], str(meta["page"] + 1) if "page" in meta else "", text)
        for number, source in enumerate(sources, start=1)
        for text, meta in zip(source["document"], source["metadata"], strict=True)
    ]
    assert tags == expected
    assert ("1", PDF_NAME, "2") == tags[0][:3]

    statuses = emitter.of("status")
    assert statuses[0] == {"action": "knowledge_search", "query": QUESTION, "done": False}
    assert statuses[-1] == {"action": "sources_retrieved", "count": len(sources), "done": True}


def test_a_tenant_the_user_cannot_read_is_not_searched(
    stack: Stack, corpus: dict[str, str], open_webui: FakeOpenWebUI
) -> None:
    open_webui.denied = {corpus["kb"], f"file-{corpus['pdf']}"}
    emitter = Recorder()

    out = asyncio.run(
        new_filter(stack).inlet(chat_body(corpus, QUESTION), __user__=dict(USER), __event_emitter__=emitter)
    )

    assert emitter.of("source")
    assert {meta["file_id"] for source in emitter.of("source") for meta in source["metadata"]} == {corpus["text"]}
    assert PDF_NAME not in out["messages"][-1]["content"]


def test_nothing_found_says_so_and_emits_no_sources(
    stack: Stack, corpus: dict[str, str], open_webui: FakeOpenWebUI
) -> None:
    open_webui.denied = {corpus["kb"], f"file-{corpus['pdf']}", f"file-{corpus['text']}"}
    emitter = Recorder()

    out = asyncio.run(
        new_filter(stack).inlet(chat_body(corpus, QUESTION), __user__=dict(USER), __event_emitter__=emitter)
    )

    injected = out["messages"][-1]["content"]
    assert "no passage matches this question" in injected
    assert "<source" not in injected.split("<context>")[1]
    assert emitter.of("source") == []
    assert emitter.of("status")[-1] == {"action": "sources_retrieved", "count": 0, "done": True}
    assert [item["type"] for item in out["files"]] == ["note"]


def test_retrieval_down_is_an_error_in_the_chat_not_a_fallback(
    stack: Stack, corpus: dict[str, str], open_webui: FakeOpenWebUI
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    function = new_filter(stack, retrieval_url=closed, timeout_seconds=5)
    body = chat_body(corpus, QUESTION)
    emitter = Recorder()

    # Open WebUI turns an inlet exception into the reply's error (main.py process_chat:
    # chat:message:error with str(exc)) and never calls the model.
    with pytest.raises(Exception, match="Knowledge search is unavailable") as raised:
        asyncio.run(function.inlet(body, __user__=dict(USER), __event_emitter__=emitter))
    assert closed in str(raised.value)
    assert emitter.of("status")[-1] == {"description": str(raised.value), "error": True, "done": True}
    assert emitter.of("source") == []
    # Were the chat to go on anyway, Open WebUI's own retrieval would still not see the items.
    assert [item["type"] for item in body["files"]] == ["note"]
    assert [item["type"] for item in body["metadata"]["files"]] == ["note"]


def test_an_error_answer_is_shown_with_its_reason(
    stack: Stack, corpus: dict[str, str], open_webui: FakeOpenWebUI
) -> None:
    function = new_filter(stack, api_key="wrong-key")

    with pytest.raises(Exception, match=r"Knowledge search failed: .*\(UNAUTHORIZED, HTTP 401\)"):
        asyncio.run(function.inlet(chat_body(corpus, QUESTION), __user__=dict(USER), __event_emitter__=Recorder()))


def test_a_chat_without_files_is_left_unchanged(stack: Stack) -> None:
    body = {
        "model": "llama3",
        "messages": [{"role": "user", "content": QUESTION}],
        "metadata": {"user_id": USER["id"], "chat_id": "chat-1", "message_id": "msg-2", "files": None},
    }
    before = copy.deepcopy(body)
    emitter = Recorder()

    out = asyncio.run(new_filter(stack).inlet(body, __user__=dict(USER), __event_emitter__=emitter))

    assert out == before
    assert emitter.events == []


def test_mode_agentic_without_the_agent_shows_the_servers_reason(
    stack: Stack, corpus: dict[str, str], open_webui: FakeOpenWebUI
) -> None:
    # The shared stack runs without ENABLE_AGENTIC_RAG: /search refuses mode "agentic".
    function = new_filter(stack, mode="agentic")

    with pytest.raises(Exception, match=r"Knowledge search failed: .*mode 'agentic' needs the agent.*HTTP 4\d\d"):
        asyncio.run(function.inlet(chat_body(corpus, QUESTION), __user__=dict(USER), __event_emitter__=Recorder()))


def test_mode_linear_is_accepted(stack: Stack, corpus: dict[str, str], open_webui: FakeOpenWebUI) -> None:
    emitter = Recorder()

    asyncio.run(
        new_filter(stack, mode="linear").inlet(
            chat_body(corpus, QUESTION), __user__=dict(USER), __event_emitter__=emitter
        )
    )

    assert emitter.of("source")[0]["source"]["id"] == corpus["pdf"]


def test_a_knowledge_bases_loader_indexed_files_are_searched(
    stack: Stack, corpus: dict[str, str], open_webui: FakeOpenWebUI
) -> None:
    # Stock Open WebUI with LOADER_INDEX_UPLOADS: the KB's file sits in file-<id>, the KB's tenant is empty.
    other_kb = str(uuid.uuid4())
    open_webui.knowledge_files[other_kb] = [corpus["text"]]
    body = chat_body(corpus, "Genoptagelse af sessionen")
    body["files"] = body["metadata"]["files"] = [{**body["files"][0], "id": other_kb}]
    emitter = Recorder()

    out = asyncio.run(new_filter(stack).inlet(body, __user__=dict(USER), __event_emitter__=emitter))

    assert open_webui.checked == [{other_kb, f"file-{corpus['text']}"}]
    [source] = emitter.of("source")
    assert source["source"]["name"] == TEXT_NAME
    assert {meta["file_id"] for meta in source["metadata"]} == {corpus["text"]}
    assert out["files"] == []


def test_open_webuis_rag_template_and_system_placement_are_used(
    stack: Stack, corpus: dict[str, str], open_webui: FakeOpenWebUI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Inside Open WebUI: its configured template (Config "rag.template"), filled by utils/task.py
    # rag_template, and RAG_SYSTEM_CONTEXT=true puts it at the end of the system message.
    async def config_get(key: str, default: Any = None) -> Any:
        return "CUSTOM {{CONTEXT}} FOR {{QUERY}}" if key == "rag.template" else default

    async def rag_template(template: str, context: str, query: str) -> str:
        return template.replace("{{CONTEXT}}", context).replace("{{QUERY}}", query)

    install_modules(
        monkeypatch,
        {
            "open_webui.env": {"RAG_SYSTEM_CONTEXT": True},
            "open_webui.models.config": {"Config": SimpleNamespace(get=config_get)},
            "open_webui.utils": {},
            "open_webui.utils.task": {"rag_template": rag_template},
        },
    )
    body = chat_body(corpus, QUESTION)

    out = asyncio.run(new_filter(stack).inlet(body, __user__=dict(USER), __event_emitter__=Recorder()))

    system, *_, last = out["messages"]
    assert system["content"].startswith('You are helpful.\nCUSTOM <source id="1"')
    assert system["content"].endswith(f" FOR {QUESTION}")
    assert last == {"role": "user", "content": QUESTION}


def page_image_token(url: str) -> str:
    prefix, suffix = f"{CITATION_BASE_URL}{CITATIONS_PATH}/", "/page.png"
    assert url.startswith(prefix), url
    assert url.endswith(suffix), url
    return url.removeprefix(prefix).removesuffix(suffix)


def test_a_pdfs_source_opens_its_best_passages_highlighted_page(
    linked: tuple[Stack, dict[str, str]], open_webui: FakeOpenWebUI
) -> None:
    running, corpus = linked
    open_webui.knowledge_files[corpus["kb"]] = [corpus["pdf"]]
    emitter = Recorder()
    before = int(time.time())
    # k past the PDF's chunk count: the text file's passages come too.
    inlet = new_filter(running, k=40).inlet
    asyncio.run(inlet(chat_body(corpus, QUESTION), __user__=dict(USER), __event_emitter__=emitter))
    after = int(time.time())

    sources = emitter.of("source")
    pdf = next(source for source in sources if source["source"]["id"] == corpus["pdf"])
    # Open WebUI 0.12.4 links a citation to source.url: the best passage's (the second page's) page image.
    assert pdf["source"]["url"] == pdf["metadata"][0]["citation_url"]
    assert pdf["metadata"][0]["page"] == 1
    source_hash = hashlib.sha256(PDF.read_bytes()).hexdigest()
    for meta in pdf["metadata"]:
        # Without file_id: Open WebUI would link its own file store before source.url.
        assert "file_id" not in meta
        assert meta["source"] == corpus["pdf"]
        token = page_image_token(meta["citation_url"])
        link = verify_link(token, CITATION_KEY.encode("utf-8"))
        assert (link.collection_name, link.file_id, link.source_hash) == (corpus["kb"], corpus["pdf"], source_hash)
        assert link.page == meta["page"]
        assert before + CITATION_TTL_SECONDS <= link.expires_at <= after + CITATION_TTL_SECONDS
        assert meta["original_url"] == f"{CITATION_BASE_URL}{CITATIONS_PATH}/{token}/original#page={meta['page'] + 1}"
    # A text file has no page to show: no link, and its file_id stays.
    text = next(source for source in sources if source["source"]["id"] == corpus["text"])
    assert "url" not in text["source"]
    assert all(meta["file_id"] == corpus["text"] and "citation_url" not in meta for meta in text["metadata"])
