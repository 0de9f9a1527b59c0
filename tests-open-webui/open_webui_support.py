"""The processes of the acceptance run and the Open WebUI API calls it makes (HTTP only).

Three processes, all on loopback, all stopped by the fixtures that start them:

- ``rag dev`` (the `make dev` stack) with LOADER_INDEX_UPLOADS=true on a temporary store, its
  OpenAI-compatible chat (``/v1``) answered by the upstream;
- the scripted OpenAI-compatible upstream (``scripted_upstream``), in this process;
- a stock Open WebUI 0.12.4 from its own virtual environment (``.cache/open-webui/venv``, built by
  `make test-open-webui`), in a temporary DATA_DIR, with every feature that would reach the
  internet or download a model switched off, its models and embeddings served by the upstream
  (its first OpenAI connection), the retrieval agent's ``/v1`` as its second OpenAI connection,
  and our ingestion service as its external document loader.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from scripted_upstream import MODEL_ID, OPEN_WEBUI, RETRIEVAL_AGENT, Call, ScriptedUpstream

REPO_ROOT = Path(__file__).resolve().parents[1]
OPEN_WEBUI_VERSION = "0.12.4"
OPEN_WEBUI_VENV = Path(os.environ.get("OPEN_WEBUI_VENV", REPO_ROOT / ".cache" / "open-webui" / "venv"))
FUNCTION_SOURCE = REPO_ROOT / "integrations" / "open-webui" / "rag_search_filter.py"
FUNCTION_ID = "rag_search_filter"
# Importing torch and the rest of Open WebUI on a shared two-core machine takes minutes.
OPEN_WEBUI_READY_TIMEOUT_S = float(os.environ.get("OPEN_WEBUI_READY_TIMEOUT", "900"))
FILE_PROCESSING_TIMEOUT_S = 600.0
CHAT_TIMEOUT_S = 300.0
# Open WebUI's OpenAI connections, in OPENAI_API_BASE_URLS' order (a model's ``urlIdx``).
UPSTREAM_CONNECTION = 0
AGENT_CONNECTION = 1


def log_tail(path: Path | None, chars: int = 6000) -> str:
    if path is None or not path.exists():
        return ""
    return path.read_text(encoding="utf-8", errors="replace")[-chars:]


def stop(process: subprocess.Popen[bytes], grace_s: float = 30) -> None:
    """SIGINT (both servers shut down cleanly on it), then SIGKILL after ``grace_s``."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


class Pending(str):
    """What a ``wait_for`` check returns while not done: the state it saw, for the timeout's message."""


def wait_for(
    what: str,
    check: Callable[[], Any],
    timeout: float,
    *,
    interval: float = 1.0,
    process: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> Any:
    """Poll ``check`` until it returns something other than a ``Pending``; raise on timeout or exit."""
    deadline = time.monotonic() + timeout
    last = Pending("no answer yet")
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what}: process exited with {process.returncode}:\n{log_tail(log)}")
        try:
            result = check()
        except (httpx.TransportError, ValueError) as exc:
            result = Pending(f"{type(exc).__name__}: {exc}")
        if not isinstance(result, Pending):
            return result
        last = result
        time.sleep(interval)
    raise RuntimeError(f"{what}: not done after {timeout:.0f}s (last: {last})\n{log_tail(log)}")


# ---------------------------------------------------------------------------------------------
# Open WebUI's process
# ---------------------------------------------------------------------------------------------


def open_webui_env(
    data_dir: Path,
    *,
    upstream_url: str,
    upstream_key: str,
    agent_url: str,
    agent_key: str,
    loader_url: str,
    loader_key: str,
    embedding_model: str,
) -> dict[str, str]:
    """The environment of an offline Open WebUI 0.12.4 (names from its env.py and config.py).

    Everything a first start would fetch is off: no Ollama, no sentence-transformers model
    (RAG_EMBEDDING_ENGINE=openai, served by the upstream), no reranker (hybrid search off), no
    web search, image generation, STT/TTS engine, version check or telemetry; pip installs of a
    Function's frontmatter requirements are off too, so the Function must run on what ships.

    Two OpenAI connections (config.py OPENAI_API_BASE_URLS / OPENAI_API_KEYS, ``;``-separated, in
    the same order): the upstream (``UPSTREAM_CONNECTION``) and the retrieval agent's ``/v1``
    (``AGENT_CONNECTION``). A model id both list stays the first one's (routers/openai.py
    ``get_all_models``: ``if model_id not in models``), so ``MODEL_ID`` is still the upstream's.
    """
    cache = data_dir / "cache"
    return {
        # A clean environment: nothing of the caller's Open WebUI, proxies or cloud settings leaks in.
        "PATH": f"{OPEN_WEBUI_VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(data_dir),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TMPDIR": str(data_dir / "tmp"),
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        # env.py
        "DATA_DIR": str(data_dir / "data"),
        "WEBUI_SECRET_KEY": secrets.token_urlsafe(32),
        "WEBUI_AUTH": "true",
        "OFFLINE_MODE": "true",  # also HF_HUB_OFFLINE=1 and no version check (env.py)
        "ENABLE_VERSION_UPDATE_CHECK": "false",
        "ENABLE_PIP_INSTALL_FRONTMATTER_REQUIREMENTS": "false",
        "ENABLE_FUNCTIONS": "true",
        "GLOBAL_LOG_LEVEL": "INFO",
        "ENABLE_OTEL": "false",
        "ENABLE_AUDIT_LOGS_FILE": "false",
        "USER_AGENT": "open-webui-acceptance",
        # config.py: the model provider is the scripted upstream only.
        "ENABLE_OLLAMA_API": "false",
        "ENABLE_OPENAI_API": "true",
        "OPENAI_API_BASE_URLS": f"{upstream_url};{agent_url}",
        "OPENAI_API_KEYS": f"{upstream_key};{agent_key}",
        "ENABLE_BASE_MODELS_CACHE": "false",
        "ENABLE_DIRECT_CONNECTIONS": "false",
        "ENABLE_SIGNUP": "true",
        "DEFAULT_USER_ROLE": "user",
        # Open WebUI's own RAG: embeddings from the upstream (offline), documents through our loader.
        "RAG_EMBEDDING_ENGINE": "openai",
        "RAG_EMBEDDING_MODEL": embedding_model,
        "RAG_OPENAI_API_BASE_URL": upstream_url,
        "RAG_OPENAI_API_KEY": upstream_key,
        "RAG_EMBEDDING_BATCH_SIZE": "32",
        "RAG_EMBEDDING_CONCURRENT_REQUESTS": "4",
        "RAG_EMBEDDING_MODEL_AUTO_UPDATE": "false",
        "RAG_RERANKING_MODEL_AUTO_UPDATE": "false",
        "ENABLE_RAG_HYBRID_SEARCH": "false",
        "RAG_TEXT_SPLITTER": "character",
        "CONTENT_EXTRACTION_ENGINE": "external",
        "EXTERNAL_DOCUMENT_LOADER_URL": loader_url,
        "EXTERNAL_DOCUMENT_LOADER_API_KEY": loader_key,
        # Nothing else that would call out.
        "ENABLE_WEB_SEARCH": "false",
        "ENABLE_IMAGE_GENERATION": "false",
        "ENABLE_CODE_INTERPRETER": "false",
        "ENABLE_CODE_EXECUTION": "false",
        "ENABLE_GOOGLE_DRIVE_INTEGRATION": "false",
        "ENABLE_ONEDRIVE_INTEGRATION": "false",
        "AUDIO_STT_ENGINE": "",
        "AUDIO_TTS_ENGINE": "",
        "WHISPER_MODEL_AUTO_UPDATE": "false",
        "ENABLE_TITLE_GENERATION": "false",
        "ENABLE_TAGS_GENERATION": "false",
        "ENABLE_FOLLOW_UP_GENERATION": "false",
        "ENABLE_AUTOCOMPLETE_GENERATION": "false",
        "ENABLE_MEMORIES": "false",
        # Libraries underneath.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "ANONYMIZED_TELEMETRY": "false",  # chromadb
        "DO_NOT_TRACK": "true",
        "SCARF_NO_ANALYTICS": "true",
        "TIKTOKEN_CACHE_DIR": str(cache / "tiktoken"),
        "HF_HOME": str(cache / "huggingface"),
    }


def start_open_webui(data_dir: Path, port: int, env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``open-webui serve`` from its own venv; output to ``log``."""
    executable = OPEN_WEBUI_VENV / "bin" / "open-webui"
    if not executable.exists():
        raise RuntimeError(f"{executable} is missing: run `make test-open-webui` (it builds that venv)")
    for directory in (data_dir / "data", data_dir / "tmp"):
        directory.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as sink:
        return subprocess.Popen(
            [str(executable), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=data_dir,
            env=dict(env),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its uvicorn gets our SIGINT only
        )


def open_webui_ready(url: str) -> bool | Pending:
    response = httpx.get(f"{url}/ready", timeout=5)
    return True if response.status_code == 200 else Pending(f"{response.status_code} {response.text[:200]}")


# ---------------------------------------------------------------------------------------------
# Open WebUI's API, as the 0.12.4 frontend calls it
# ---------------------------------------------------------------------------------------------


def checked(response: httpx.Response, *, what: str) -> Any:
    assert response.status_code == 200, (
        f"{what}: {response.request.method} {response.request.url} -> {response.status_code} {response.text[:2000]}"
    )
    return response.json()


def sign_up_admin(url: str) -> tuple[httpx.Client, dict[str, Any]]:
    """The first account (routers/auths.py signup: the first user becomes admin) and a client with its token."""
    password = secrets.token_urlsafe(16) + "aA1!"
    body = checked(
        httpx.post(
            f"{url}/api/v1/auths/signup",
            json={"name": "Acceptance Admin", "email": "admin@example.com", "password": password},
            timeout=60,
        ),
        what="sign-up",
    )
    client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {body['token']}"}, timeout=120)
    return client, body


def install_function(client: httpx.Client, source: Path, valves: Mapping[str, Any]) -> dict[str, Any]:
    """Create the Function from its file, switch it on and global, and set its valves (routers/functions.py)."""
    created = checked(
        client.post(
            "/api/v1/functions/create",
            json={
                "id": FUNCTION_ID,
                "name": "RAG search",
                "content": source.read_text(encoding="utf-8"),
                "meta": {"description": "Retrieval through our /search (acceptance run)"},
            },
        ),
        what="create the Function",
    )
    assert created["type"] == "filter", created
    function = checked(client.post(f"/api/v1/functions/id/{FUNCTION_ID}/toggle"), what="activate the Function")
    assert function["is_active"] is True, function
    function = checked(client.post(f"/api/v1/functions/id/{FUNCTION_ID}/toggle/global"), what="make it global")
    assert function["is_global"] is True, function
    spec = checked(client.get(f"/api/v1/functions/id/{FUNCTION_ID}/valves/spec"), what="valves spec")
    unknown = set(valves) - set((spec or {}).get("properties", {}))
    assert not unknown, f"the Function has no valves {sorted(unknown)}; its spec: {json.dumps(spec)[:2000]}"
    stored = checked(client.post(f"/api/v1/functions/id/{FUNCTION_ID}/valves/update", json=dict(valves)), what="valves")
    return {"function": function, "valves": stored, "spec": spec}


def upload(client: httpx.Client, path: Path, name: str, content_type: str) -> dict[str, Any]:
    """``POST /api/v1/files/`` as the chat input uploads a file (processed in the background)."""
    with path.open("rb") as handle:
        body: dict[str, Any] = checked(
            client.post("/api/v1/files/", files={"file": (name, handle, content_type)}), what=f"upload {name}"
        )
    return body


def wait_processed(client: httpx.Client, file_id: str, log: Path | None) -> dict[str, Any]:
    """Poll ``GET /api/v1/files/{id}/process/status`` until completed; raise on failed."""

    def status() -> bool | Pending:
        state = checked(client.get(f"/api/v1/files/{file_id}/process/status"), what="process status")
        if state.get("status") == "failed":
            file = client.get(f"/api/v1/files/{file_id}").json()
            raise AssertionError(f"Open WebUI failed to process {file_id}: {json.dumps(file)[:3000]}\n{log_tail(log)}")
        return True if state.get("status") == "completed" else Pending(json.dumps(state))

    wait_for(f"processing of {file_id}", status, FILE_PROCESSING_TIMEOUT_S, log=log)
    file: dict[str, Any] = checked(client.get(f"/api/v1/files/{file_id}"), what="file")
    return file


@dataclass
class Turn:
    """One question asked through ``POST /api/chat/completions`` and what Open WebUI stored."""

    chat_id: str
    user_message_id: str
    assistant_message_id: str
    started: float  # time.monotonic() just before the request
    finished: float  # when the stored assistant message was done
    response: dict[str, Any]
    chat: dict[str, Any]  # GET /api/v1/chats/{id}
    # What the scripted upstream was asked while the turn ran (``ask_recorded``).
    upstream_calls: list[Call] = field(default_factory=lambda: list[Call]())

    def _bodies(self, caller: str, path: str) -> list[dict[str, Any]]:
        return [call.body for call in self.upstream_calls if call.caller == caller and call.path.rstrip("/") == path]

    @property
    def model_requests(self) -> list[dict[str, Any]]:
        """The chat completions Open WebUI itself asked of the upstream (its direct connection)."""
        return self._bodies(OPEN_WEBUI, "/v1/chat/completions")

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        """The embeddings Open WebUI asked for (its own RAG)."""
        return self._bodies(OPEN_WEBUI, "/v1/embeddings")

    @property
    def agent_requests(self) -> list[dict[str, Any]]:
        """The chat completions the retrieval agent asked of the upstream (CHAT_UPSTREAM_BASE_URL)."""
        return self._bodies(RETRIEVAL_AGENT, "/v1/chat/completions")

    @property
    def assistant(self) -> dict[str, Any]:
        message: dict[str, Any] = self.chat["chat"]["history"]["messages"][self.assistant_message_id]
        return message


def ask(client: httpx.Client, model: str, question: str, files: list[dict[str, Any]], log: Path | None) -> Turn:
    """A new chat with one question, the way the 0.12.4 frontend sends it, then the stored chat.

    The frontend (Chat.svelte, built into ``frontend/_app/immutable/chunks/*.js``) posts ``model``,
    ``messages``, ``files`` (an attached knowledge base is ``{type: "collection", id, ...}``),
    ``session_id`` (its socket), ``id`` (the assistant message's id), ``parent_id: null`` with no
    ``chat_id`` for a new chat, and ``user_message``. With ``session_id`` and no ``chat_id``,
    main.py ``chat_completion`` creates the chat itself (history with the user message and an
    empty assistant message), runs the completion as a background task and answers
    ``{status, task_ids, chat_id}``; the task saves the answer into the assistant message, and
    socket/main.py ``get_event_emitter`` appends each ``source`` event a Function emits to the
    message's ``sources`` (``Chats.upsert_message_to_chat_by_id_and_message_id``). No socket is
    needed: the events sent to the (absent) browser session go nowhere, the database keeps them.
    """
    user_message_id, assistant_message_id = str(uuid.uuid4()), str(uuid.uuid4())
    user_message = {
        "id": user_message_id,
        "parentId": None,
        "childrenIds": [assistant_message_id],
        "role": "user",
        "content": question,
        "files": files,
        "timestamp": int(time.time()),
        "models": [model],
    }
    started = time.monotonic()
    response: dict[str, Any] = checked(
        client.post(
            "/api/chat/completions",
            json={
                "stream": True,
                "model": model,
                "messages": [{"role": "user", "content": question}],
                "params": {},
                "files": files,
                "features": {},
                "variables": {},
                "session_id": f"acceptance-{uuid.uuid4()}",
                "id": assistant_message_id,
                "parent_id": None,
                "user_message": user_message,
            },
        ),
        what="chat completion",
    )
    chat_id = response.get("chat_id")
    assert chat_id, f"no chat_id in {response}"

    def stored() -> dict[str, Any] | Pending:
        chat: dict[str, Any] = checked(client.get(f"/api/v1/chats/{chat_id}"), what="read the chat")
        message = chat["chat"]["history"]["messages"].get(assistant_message_id) or {}
        if message.get("error"):
            raise AssertionError(f"Open WebUI stored an error: {json.dumps(message)[:3000]}\n{log_tail(log)}")
        return chat if message.get("done") else Pending(f"assistant message not done: {json.dumps(message)[:500]}")

    chat = wait_for("the stored answer", stored, CHAT_TIMEOUT_S, interval=0.5, log=log)
    return Turn(chat_id, user_message_id, assistant_message_id, started, time.monotonic(), response, chat)


@dataclass
class RagDev:
    ingestion_url: str
    retrieval_url: str
    ingestion_key: str
    retrieval_key: str
    log: Path

    def retrieval(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.retrieval_url, headers={"Authorization": f"Bearer {self.retrieval_key}"}, timeout=60
        )

    def ingestion(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.ingestion_url, headers={"Authorization": f"Bearer {self.ingestion_key}"}, timeout=600
        )


@dataclass
class OpenWebUI:
    url: str
    log: Path
    version: str


@dataclass
class Library:
    """The two uploads (Open WebUI's file records, after processing) and the knowledge base holding them."""

    contract: dict[str, Any]
    scan: dict[str, Any]
    knowledge: dict[str, Any]  # as GET /api/v1/knowledge/ lists it

    @property
    def attached(self) -> list[dict[str, Any]]:
        """The chat's ``files`` with the knowledge base attached: the frontend sends the listed item plus its type."""
        return [{**self.knowledge, "type": "collection"}]


# Background work a finished turn may still trigger upstream (none is switched on; this catches it).
SETTLE_S = 2.0


def ask_recorded(
    client: httpx.Client,
    upstream: ScriptedUpstream,
    question: str,
    files: list[dict[str, Any]],
    log: Path | None,
    *,
    model: str = MODEL_ID,
) -> Turn:
    """``ask``, with the upstream calls made from just before the request until shortly after the answer."""
    mark = len(upstream.recorder)
    turn = ask(client, model, question, files, log)
    time.sleep(SETTLE_S)
    turn.upstream_calls = upstream.recorder.since(mark)
    return turn


# ---------------------------------------------------------------------------------------------
# Our own API
# ---------------------------------------------------------------------------------------------


def ingest(
    rag_dev: RagDev, path: Path, *, file_id: str, filename: str, collection_name: str, user_id: str
) -> dict[str, Any]:
    """Multipart ``PUT /api/v1/ingest`` of ``path`` into ``collection_name`` (synchronous: the answer
    comes when the document is indexed); the 200 body."""
    with rag_dev.ingestion() as client, path.open("rb") as handle:
        body: dict[str, Any] = checked(
            client.put(
                "/api/v1/ingest",
                files={"file": (filename, handle, "application/pdf")},
                data={
                    "file_id": file_id,
                    "filename": filename,
                    "collection_name": collection_name,
                    "user_id": user_id,
                },
            ),
            what=f"ingest {filename} into {collection_name}",
        )
    return body
