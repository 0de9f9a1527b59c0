"""
title: RAG search
author: rag-backend
version: 0.1.0
license: MIT
description: Answers chats with attached knowledge bases and files from the retrieval agent's POST /search (linear or agentic), with numbered citations, instead of Open WebUI's own retrieval.
required_open_webui_version: 0.12.4
"""

# Keep this file free of the words Open WebUI rewrites on import (utils/plugin.py replace_imports:
# "from" followed by utils, apps, main or config), and keep every line of the docstring above a
# "key: value" line: Open WebUI reads all of them as frontmatter.

import html
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import httpx
from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

EventEmitter = Callable[[dict[str, Any]], Awaitable[Any]] | None

# Open WebUI 0.12.4's DEFAULT_RAG_TEMPLATE (config.py), used only where its configured template
# cannot be read, so the model gets the same instructions either way.
DEFAULT_RAG_TEMPLATE = """### Task:
Respond to the user query using the provided context, incorporating inline citations in the format [id] **only when the <source> tag includes an explicit id attribute** (e.g., <source id="1">).

### Guidelines:
- If you don't know the answer, clearly state that.
- If uncertain, ask the user for clarification.
- Respond in the same language as the user's query.
- If the context is unreadable or of poor quality, inform the user and provide the best possible answer.
- If the answer isn't present in the context but you possess the knowledge, explain this to the user and provide the answer using your own understanding.
- **Only include inline citations using [id] (e.g., [1], [2]) when the <source> tag includes an id attribute.**
- Do not cite if the <source> tag does not contain an id attribute.
- Do not use XML tags in your response.
- Ensure citations are concise and directly related to the information provided.

### Example of Citation:
If the user asks about a specific topic and the information is found in a source with a provided id attribute, the response should include the citation like in the following example:
* "According to the study, the proposed method increases efficiency by 20% [1]."

### Output:
Provide a clear and direct response to the user's query, including inline citations in the format [id] only when the <source> tag with id attribute is present in the context.

<context>
{{CONTEXT}}
</context>
"""

NOTHING_FOUND = (
    "The attached knowledge bases and files were searched and no passage matches this question. "
    "Say so; do not cite sources."
)

# Access checks and knowledge-base file lists come from Open WebUI's own models, imported lazily.
OUTSIDE_OPEN_WEBUI = "The RAG search Function needs Open WebUI's models (it runs only inside Open WebUI)."


class RetrievalUnavailable(Exception):
    """Raised from the inlet: Open WebUI stops the chat and shows the message as the reply's error."""


class Filter:
    class Valves(BaseModel):
        priority: int = Field(default=0, description="Filter order; lower runs first.")
        retrieval_url: str = Field(
            default="http://retrieval-agent:8000", description="Base URL of the retrieval agent (POST /search)."
        )
        api_key: str = Field(default="", description="The retrieval agent's API_KEY, sent as a Bearer token.")
        k: int = Field(default=8, ge=1, le=100, description="Passages to retrieve per question.")
        mode: Literal["default", "linear", "agentic"] = Field(
            default="default",
            description="default: the retrieval agent's own setting; linear: one hybrid search; agentic: an LLM plans the searches.",
        )
        timeout_seconds: float = Field(default=60.0, gt=0, description="How long to wait for /search.")
        message_count: int = Field(
            default=6, ge=1, le=50, description="Trailing user/assistant messages sent, so follow-ups are understood."
        )

    def __init__(self) -> None:
        self.valves = self.Valves()
        # No `file_handler = True`: Open WebUI would then drop every attached item after the
        # filters (utils/filter.py), notes, chats and URLs too. The inlet removes only what it serves.

    async def inlet(
        self, body: dict[str, Any], __user__: dict[str, Any] | None = None, __event_emitter__: EventEmitter = None
    ) -> dict[str, Any]:
        items = body.get("files") or []
        served = [item for item in items if _serves(item)]
        if not served:
            return body
        question = _last_user_text(body.get("messages") or [])
        remaining = [item for item in items if item not in served]
        _drop_served(body, served, remaining)
        if not question:
            return body  # an attachment without text: nothing to search for

        await _emit(
            __event_emitter__,
            {"type": "status", "data": {"action": "knowledge_search", "query": question, "done": False}},
        )
        try:
            tenants = await _accessible(await _tenants(served), __user__ or {})
            hits = await self._search(body.get("messages") or [], tenants) if tenants else []
        except RetrievalUnavailable as exc:
            await _emit(
                __event_emitter__,
                {"type": "status", "data": {"description": str(exc), "error": True, "done": True}},
            )
            raise

        documents = _group_by_document(hits)
        context = _context(documents) or NOTHING_FOUND
        body["messages"] = await _inject(body.get("messages") or [], context, question)
        for document in documents:
            await _emit(__event_emitter__, {"type": "source", "data": document})
        await _emit(
            __event_emitter__,
            {"type": "status", "data": {"action": "sources_retrieved", "count": len(documents), "done": True}},
        )
        return body

    async def _search(
        self, messages: list[dict[str, Any]], tenants: list[str]
    ) -> list[tuple[str, dict[str, Any], float | None]]:
        url = f"{self.valves.retrieval_url.rstrip('/')}/search"
        payload: dict[str, Any] = {
            "messages": _recent_turns(messages, self.valves.message_count),
            "collection_names": tenants,
            "k": self.valves.k,
        }
        if self.valves.mode != "default":
            payload["mode"] = self.valves.mode
        headers = {"Authorization": f"Bearer {self.valves.api_key}"} if self.valves.api_key else {}
        try:
            async with httpx.AsyncClient(timeout=self.valves.timeout_seconds) as client:
                response = await client.post(url, json=payload, headers=headers)
        except httpx.HTTPError as exc:
            raise RetrievalUnavailable(
                f"Knowledge search is unavailable: the retrieval service at {self.valves.retrieval_url} "
                f"could not be reached ({type(exc).__name__}). No answer was generated without your documents; "
                "ask an administrator to check the retrieval agent."
            ) from exc
        if response.status_code >= 400:
            raise RetrievalUnavailable(_error_message(response))
        try:
            answer = response.json()
            # Open WebUI reads only the first result set; so does this.
            texts, metas = answer["documents"][0], answer["metadatas"][0]
            distances = (answer.get("distances") or [[]])[0] or [None] * len(texts)
            return list(zip(texts, metas, distances, strict=True))
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise RetrievalUnavailable(
                f"Knowledge search failed: the retrieval service at {self.valves.retrieval_url} answered "
                "something that is not a search result. No answer was generated without your documents."
            ) from exc


def _serves(item: Any) -> bool:
    # Full-context items ask Open WebUI for the whole text, not a search: left to it.
    if not isinstance(item, dict) or item.get("context") == "full":
        return False
    if item.get("type") == "collection":
        return bool(item.get("id") or item.get("collection_names"))
    return item.get("type") == "file" and bool(item.get("id"))


def _drop_served(body: dict[str, Any], served: list[dict[str, Any]], remaining: list[dict[str, Any]]) -> None:
    # New lists, never in place: a multi-model chat shares one files list between its models.
    body["files"] = remaining
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("files"), list):
        metadata["files"] = [item for item in metadata["files"] if item not in served]


async def _tenants(served: list[dict[str, Any]]) -> list[str]:
    """Fork-ingested KBs live in the KB id's tenant, loader-indexed files in ``file-<id>``: both."""
    tenants: list[str] = []
    for item in served:
        if item.get("type") == "file":
            tenants.append(item["id"] if item.get("legacy") else f"file-{item['id']}")
        elif item.get("legacy") and item.get("collection_names"):
            tenants.extend(str(name) for name in item["collection_names"])
        else:
            tenants.append(item["id"])
            tenants.extend(f"file-{file_id}" for file_id in await _knowledge_file_ids(item))
    return list(dict.fromkeys(tenants))


async def _knowledge_file_ids(item: dict[str, Any]) -> list[str]:
    files = item.get("files")
    if isinstance(files, list) and files:
        return [str(f["id"]) for f in files if isinstance(f, dict) and f.get("id")]
    # The chat's KB item (the knowledge list's row) carries no file list; the table does.
    try:
        from open_webui.models.knowledge import Knowledges  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RetrievalUnavailable(OUTSIDE_OPEN_WEBUI) from exc
    return [row.id for row in await Knowledges.get_file_metadatas_by_id(item["id"])]


async def _accessible(tenants: list[str], user: dict[str, Any]) -> list[str]:
    """Only what Open WebUI's own retrieval would let this user read: chat items are client-supplied."""
    try:
        from open_webui.models.users import Users  # type: ignore[import-not-found]
        from open_webui.retrieval.utils import filter_accessible_collections  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RetrievalUnavailable(OUTSIDE_OPEN_WEBUI) from exc
    account = await Users.get_user_by_id(user.get("id", ""))
    if account is None:
        return []
    allowed = await filter_accessible_collections(set(tenants), account)
    return [tenant for tenant in tenants if tenant in allowed]


def _error_message(response: httpx.Response) -> str:
    try:
        error = response.json()
    except ValueError:
        error = {}
    if not isinstance(error, dict):
        error = {}
    what = error.get("error") or error.get("detail") or response.text[:300] or response.reason_phrase
    code = f"{error['code']}, " if error.get("code") else ""
    hint = f" {error['hint']}" if error.get("hint") else ""
    return (
        f"Knowledge search failed: {what} ({code}HTTP {response.status_code}).{hint} "
        "No answer was generated without your documents."
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return _text(message.get("content")).strip()
    return ""


def _recent_turns(messages: list[dict[str, Any]], count: int) -> list[dict[str, str]]:
    turns = [
        {"role": m["role"], "content": _text(m.get("content"))}
        for m in messages
        if m.get("role") in ("user", "assistant")
    ]
    return turns[-count:]


def _document_key(meta: dict[str, Any]) -> str:
    source = str(meta.get("source") or "")
    if _is_http(source):
        return source
    return str(meta.get("file_id") or source or meta.get("name") or "document")


def _group_by_document(hits: list[tuple[str, dict[str, Any], float | None]]) -> list[dict[str, Any]]:
    """One source event per document, in the order of its best passage.

    Open WebUI numbers citations by the n-th distinct ``metadata.source`` over the message's source
    events and merges events with one key into one chip, so ``metadata.source`` is set to the key
    the context numbers by: [n] in the answer opens the n-th chip.

    The chip's link is ``source.url`` (0.12.4's Citations/CitationModal.svelte: the title and each
    passage's "Content" link), one per chip: a web page's own URL, else the highlighted page of the
    document's best passage (its ``citation_url`` from /search, when the retrieval agent signs
    links). Open WebUI links ``metadata.file_id`` to its own file store before ``source.url``, so a
    document linked to its page leaves ``file_id`` out of its passages' metadata (each still has its
    own ``citation_url`` and ``original_url``). As the retrieval agent's chat source events do.
    """
    documents: dict[str, dict[str, Any]] = {}
    for text, meta, distance in hits:
        meta = meta if isinstance(meta, dict) else {}
        key = _document_key(meta)
        name = str(meta.get("name") or meta.get("source") or key)
        if key not in documents:
            source: dict[str, Any] = {"id": key, "name": name}
            if _is_http(key):
                source["url"] = key
            documents[key] = {"source": source, "document": [], "metadata": [], "distances": []}
        entry = documents[key]
        entry["document"].append(text)
        entry["metadata"].append({**meta, "source": key, "name": name})
        entry["distances"].append(distance if distance is not None else 0.0)
    for entry in documents.values():
        page_link = next(
            (meta["citation_url"] for meta in entry["metadata"] if _is_http(meta.get("citation_url"))), None
        )
        if "url" not in entry["source"] and page_link is not None:
            entry["source"]["url"] = page_link
            entry["metadata"] = [
                {field: v for field, v in meta.items() if field != "file_id"} for meta in entry["metadata"]
            ]
    return list(documents.values())


def _is_http(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(("http://", "https://"))


def _context(documents: list[dict[str, Any]]) -> str:
    """The passages as Open WebUI's get_source_context writes them, labelled with file and page."""
    lines = []
    for number, document in enumerate(documents, start=1):
        for text, meta in zip(document["document"], document["metadata"], strict=True):
            page = meta.get("page")
            label = f' page="{page + 1}"' if isinstance(page, int) and not isinstance(page, bool) and page >= 0 else ""
            lines.append(f'<source id="{number}" name="{html.escape(meta["name"])}"{label}>{text}</source>')
    return "\n".join(lines)


async def _inject(messages: list[dict[str, Any]], context: str, question: str) -> list[dict[str, Any]]:
    """Where and how Open WebUI 0.12.4 puts its own RAG context (middleware apply_source_context_to_messages)."""
    try:
        from open_webui.env import RAG_SYSTEM_CONTEXT  # type: ignore[import-not-found]
        from open_webui.models.config import Config  # type: ignore[import-not-found]
        from open_webui.utils.task import rag_template  # type: ignore[import-not-found]

        content = await rag_template(await Config.get("rag.template"), context, question)
        system_context = bool(RAG_SYSTEM_CONTEXT)
    except ImportError:
        content = DEFAULT_RAG_TEMPLATE.replace("{{CONTEXT}}", context)
        system_context = False
    if system_context:
        if messages and messages[0].get("role") == "system":
            messages[0] = _with_text(messages[0], content, append=True)
        else:
            messages.insert(0, {"role": "system", "content": content})
    elif messages and messages[-1].get("role") == "user":
        messages[-1] = _with_text(messages[-1], content, append=False)
    else:
        messages.append({"role": "user", "content": content})
    return messages


def _with_text(message: dict[str, Any], content: str, *, append: bool) -> dict[str, Any]:
    """Open WebUI's update_message_content (utils/misc.py), on a copy of the message."""
    message = dict(message)
    if isinstance(message.get("content"), list):
        parts = []
        for part in message["content"]:
            if isinstance(part, dict) and part.get("type") == "text":
                part = {**part, "text": f"{part['text']}\n{content}" if append else f"{content}\n{part['text']}"}
            parts.append(part)
        message["content"] = parts
    else:
        old = message.get("content") or ""
        message["content"] = f"{old}\n{content}" if append else f"{content}\n{old}"
    return message


async def _emit(emitter: EventEmitter, event: dict[str, Any]) -> None:
    # Open WebUI passes None when the request has no chat message to report to (an API call).
    if emitter is not None:
        await emitter(event)
