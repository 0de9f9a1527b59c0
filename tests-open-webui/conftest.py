"""Fixtures of the Open WebUI acceptance run: the processes, then the scenario, once per session.

Every process started here is stopped by its fixture, and the temporary directory (stores, Open
WebUI's DATA_DIR, the logs) is removed at the end; OPEN_WEBUI_TEST_KEEP=1 keeps it to look at.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # --import-mode=importlib: our helper modules

from integration_support import free_port, start_rag_dev, stop_process, wait_ready

from open_webui_support import (
    FUNCTION_SOURCE,
    OPEN_WEBUI_READY_TIMEOUT_S,
    Library,
    OpenWebUI,
    RagDev,
    Turn,
    ask_recorded,
    checked,
    ingest,
    install_function,
    open_webui_env,
    open_webui_ready,
    sign_up_admin,
    start_open_webui,
    stop,
    upload,
    wait_for,
    wait_processed,
)
from scenario import (
    CONTRACT,
    CONTRACT_NAME,
    CONTRACT_QUESTION,
    HANDBOOK,
    HANDBOOK_FILE_ID,
    HANDBOOK_FILE_NAME,
    HANDBOOK_NAME,
    SCAN,
    SCAN_NAME,
    SCAN_QUESTION,
)
from scripted_upstream import EMBEDDING_MODEL, MODEL_ID, ScriptedUpstream

RAG_READY_TIMEOUT_S = 300


@pytest.fixture(scope="session")
def workdir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="open-webui-acceptance-"))
    yield root
    if os.environ.get("OPEN_WEBUI_TEST_KEEP") == "1":
        sys.stderr.write(f"\nkept {root}\n")
    else:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def upstream(workdir: Path) -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(api_key=secrets.token_urlsafe(24), agent_key=secrets.token_urlsafe(24)) as server:
        yield server
        # What the model provider was sent, for a kept workdir (OPEN_WEBUI_TEST_KEEP=1).
        calls = [
            {"at": call.at, "caller": call.caller, "method": call.method, "path": call.path, "body": call.body}
            for call in server.recorder.calls
        ]
        (workdir / "upstream-calls.json").write_text(json.dumps(calls, indent=1), encoding="utf-8")


@pytest.fixture(scope="session")
def rag_dev(workdir: Path, upstream: ScriptedUpstream) -> Iterator[RagDev]:
    """`rag dev` (what `make dev` runs) on free ports, fresh keys, a temporary store, LOADER_INDEX_UPLOADS=true.

    Its OpenAI-compatible chat answers with the scripted model, called with the upstream's second key
    (so its calls are told from Open WebUI's), and shows the handbook tenant by a readable name.
    """
    keys = {"INGESTION_API_KEY": secrets.token_urlsafe(32), "RETRIEVAL_API_KEY": secrets.token_urlsafe(32)}
    root = workdir / "rag-dev"
    root.mkdir()
    # Nothing of the caller's chat, memory or citation-link configuration leaks in (settings/chat.py): `rag dev`
    # signs links itself, with a key it keeps beside the store, to its own ingestion service's URL.
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CHAT_", "MEMORY_", "CITATION_")) and name not in {"ENABLE_MEMORY", "ORIGINALS_DIR"}
    }
    env = {
        **inherited,
        **keys,
        "CHAT_UPSTREAM_BASE_URL": upstream.url,
        "CHAT_UPSTREAM_API_KEY": upstream.agent_key,
        "CHAT_DEFAULT_MODEL": MODEL_ID,
        "CHAT_KNOWLEDGE_BASE_NAMES": json.dumps({HANDBOOK: HANDBOOK_NAME}),
        "ENABLE_MEMORY": "false",
        "QDRANT_PATH": str(root / "qdrant"),
        "LOADER_INDEX_UPLOADS": "true",
        "ENABLE_QUERY_GENERATION": "false",
        "LOCAL_MODELS_DIR": os.environ.get(
            "LOCAL_MODELS_DIR", str(Path(__file__).resolve().parents[1] / ".cache" / "models")
        ),
    }
    env.pop("QDRANT_URI", None)
    log = root / "rag-dev.log"
    process, ingestion_url, retrieval_url = start_rag_dev(root / "qdrant", env, log, cwd=root)
    try:
        wait_ready(ingestion_url, process, log, RAG_READY_TIMEOUT_S)
        wait_ready(retrieval_url, process, log, RAG_READY_TIMEOUT_S)
        yield RagDev(ingestion_url, retrieval_url, keys["INGESTION_API_KEY"], keys["RETRIEVAL_API_KEY"], log)
    finally:
        stop_process(process)


@pytest.fixture(scope="session")
def open_webui(workdir: Path, rag_dev: RagDev, upstream: ScriptedUpstream) -> Iterator[OpenWebUI]:
    """A stock Open WebUI from `.cache/open-webui/venv`, ready (``GET /ready``)."""
    data_dir = workdir / "open-webui"
    data_dir.mkdir()
    port = free_port()
    env = open_webui_env(
        data_dir,
        upstream_url=upstream.url,
        upstream_key=upstream.api_key,
        agent_url=f"{rag_dev.retrieval_url}/v1",
        agent_key=rag_dev.retrieval_key,
        loader_url=rag_dev.ingestion_url,
        loader_key=rag_dev.ingestion_key,
        embedding_model=EMBEDDING_MODEL,
    )
    log = data_dir / "open-webui.log"
    process = start_open_webui(data_dir, port, env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            "Open WebUI /ready", lambda: open_webui_ready(url), OPEN_WEBUI_READY_TIMEOUT_S, process=process, log=log
        )
        version = httpx.get(f"{url}/api/version", timeout=10).json()["version"]
        yield OpenWebUI(url, log, version)
    finally:
        stop(process)


@pytest.fixture(scope="session")
def admin(open_webui: OpenWebUI) -> Iterator[httpx.Client]:
    client, _ = sign_up_admin(open_webui.url)
    with client:
        yield client


@pytest.fixture(scope="session")
def library(admin: httpx.Client, open_webui: OpenWebUI) -> Library:
    """Both files uploaded through Open WebUI (so through our loader) and added to a new knowledge base."""
    contract = upload(admin, CONTRACT, CONTRACT_NAME, "application/pdf")
    scan = upload(admin, SCAN, SCAN_NAME, "application/pdf")
    contract = wait_processed(admin, contract["id"], open_webui.log)
    scan = wait_processed(admin, scan["id"], open_webui.log)
    created = checked(
        admin.post("/api/v1/knowledge/create", json={"name": "Acceptance KB", "description": "a contract and a scan"}),
        what="create the knowledge base",
    )
    for file in (contract, scan):
        checked(admin.post(f"/api/v1/knowledge/{created['id']}/file/add", json={"file_id": file["id"]}), what="add")
    listed = checked(admin.get("/api/v1/knowledge/"), what="list knowledge bases")
    [item] = [kb for kb in listed["items"] if kb["id"] == created["id"]]
    return Library(contract, scan, item)


@pytest.fixture(scope="session")
def control_turn(admin: httpx.Client, library: Library, upstream: ScriptedUpstream, open_webui: OpenWebUI) -> Turn:
    """The contract question asked before the Function exists: Open WebUI's own retrieval answers it.

    It shows that the signs of Open WebUI's own retrieval the other turns must lack (a query
    embedded during the chat, sources from its own index) are what this setup really produces.
    """
    return ask_recorded(admin, upstream, CONTRACT_QUESTION, library.attached, open_webui.log)


@pytest.fixture(scope="session")
def function(admin: httpx.Client, rag_dev: RagDev, control_turn: Turn) -> dict[str, Any]:
    """The Function, installed after the control turn, active, global, its valves pointing at `rag dev`."""
    if not FUNCTION_SOURCE.exists():
        pytest.fail(f"{FUNCTION_SOURCE} is missing: the Function under test")
    return install_function(
        admin, FUNCTION_SOURCE, {"retrieval_url": rag_dev.retrieval_url, "api_key": rag_dev.retrieval_key, "k": 5}
    )


@pytest.fixture(scope="session")
def contract_turn(
    admin: httpx.Client, library: Library, function: dict[str, Any], upstream: ScriptedUpstream, open_webui: OpenWebUI
) -> Turn:
    """The question whose answer is on the contract's third page (0-based 2), the knowledge base attached."""
    return ask_recorded(admin, upstream, CONTRACT_QUESTION, library.attached, open_webui.log)


@pytest.fixture(scope="session")
def scan_turn(
    admin: httpx.Client, library: Library, function: dict[str, Any], upstream: ScriptedUpstream, open_webui: OpenWebUI
) -> Turn:
    """A question only the scan's OCR text answers, the knowledge base attached."""
    return ask_recorded(admin, upstream, SCAN_QUESTION, library.attached, open_webui.log)


@pytest.fixture(scope="session")
def handbook(rag_dev: RagDev) -> dict[str, Any]:
    """The contract ingested straight into our knowledge-base tenant ``handbook`` (not through Open WebUI)."""
    return ingest(
        rag_dev,
        CONTRACT,
        file_id=HANDBOOK_FILE_ID,
        filename=HANDBOOK_FILE_NAME,
        collection_name=HANDBOOK,
        user_id="acceptance-admin",
    )


@pytest.fixture(scope="session")
def open_webui_models(admin: httpx.Client, library: Library, handbook: dict[str, Any]) -> list[dict[str, Any]]:
    """``GET /api/models`` once the store holds the handbook and the uploads' file-<id> tenants."""
    listed: list[dict[str, Any]] = checked(admin.get("/api/models", params={"refresh": "true"}), what="models")["data"]
    return listed


@pytest.fixture(scope="session")
def handbook_turn(
    admin: httpx.Client,
    function: dict[str, Any],
    open_webui_models: list[dict[str, Any]],
    upstream: ScriptedUpstream,
    open_webui: OpenWebUI,
) -> Turn:
    """The contract question asked of <model>@handbook (the retrieval agent's connection), no files attached.

    It needs ``function``: the Function is installed, active and global when this chat runs, so
    the chat shows that it stays out of the way of a chat without files.
    """
    return ask_recorded(admin, upstream, CONTRACT_QUESTION, [], open_webui.log, model=f"{MODEL_ID}@{HANDBOOK}")
