"""A scripted OpenAI-compatible chat-completions server on loopback, for black-box agentic tests.

One server answers every test, so a marker in the user's question picks the behaviour:

- (none): call ``retrieve`` with the question, then answer DONE;
- ``[plain]``: answer the queries as text (no tool call);
- ``[loop]``: call ``retrieve`` forever;
- ``[hang]``: call ``retrieve``, then hang for ``hang_seconds`` before answering;
- ``[down]``: drop the connection without an answer (an endpoint that is down);
- ``[foreign:<collection>:<file_id>]``: call ``retrieve`` naming that collection, then ``read_document`` of
  that file (another tenant's), then DONE;
- ``[read]``: ``retrieve``, then ``read_document`` of the first result's file, then DONE;
- ``[list]``: ``list_documents`` (most recent first), then ``read_document`` of the first one, then DONE.

A chat request of the retrieval agent's /v1/chat/completions (its context system message carries
numbered passages) is answered "According to <the first passage's header> [1]."; one with a memory
message (and no passages) "I remember: <the facts>."; any other request without tools "Noted.".
The memory reconciler's two calls are answered by rule (``_memory_answer``): the facts of
``MEMORY_FACTS`` whose phrase the newest message holds, and an UPDATE of a shown fact that shares a
word with the candidate (else an ADD). A request with ``"stream": true`` gets its answer as SSE chunks.
``POST /v1/embeddings`` answers ``EMBEDDING`` (a pass-through's upstream); ``paths`` records every path asked.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EMBEDDING: dict[str, Any] = {
    "object": "list",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.5, -0.25]}],
    "model": "scripted-embedder",
}
_MARKER = re.compile(r"\[(plain|loop|hang|down|read|list|foreign:[^\]]+)\]")


def _completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def tool_call(name: str, arguments: dict[str, Any], turn: int) -> dict[str, Any]:
    call = {"id": f"call_{turn}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return _completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")


def text(content: str) -> dict[str, Any]:
    return _completion({"role": "assistant", "content": content}, "stop")


def _question(body: dict[str, Any]) -> str:
    users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
    first = users[0] if users and isinstance(users[0], str) else ""
    # The agent's prompt quotes the conversation as "USER: ..." lines.
    lines = [line.removeprefix("USER: ") for line in first.splitlines() if line.startswith("USER: ")]
    return lines[-1] if lines else first


def _tool_results(body: dict[str, Any]) -> list[Any]:
    results: list[Any] = []
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            try:
                results.append(json.loads(message.get("content") or "null"))
            except ValueError:
                results.append(None)
    return results


# The first line of the first passage in the chat endpoint's context message.
_FIRST_PASSAGE = re.compile(r"^\[1\] (.+)$", re.MULTILINE)


# The memory reconciler's output tools (retrieval_agent.memory.reconcile).
EXTRACT_TOOL = "record_facts"
DECIDE_TOOL = "decide_memory_operations"
MEMORY_FACTS = {
    "i use pip": "The user uses pip for Python packaging.",
    "switched to poetry": "The user uses poetry for Python packaging.",
    "green tea": "The user drinks green tea.",
}
_MEMORY_TOPICS = {"packaging", "tea"}
_MEMORY_PROMPT = "What you remember about the user"


def _last_user(body: dict[str, Any]) -> str:
    users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users and isinstance(users[-1], str) else ""


def _memory_answer(body: dict[str, Any]) -> dict[str, Any] | None:
    tools = {tool["function"]["name"] for tool in body.get("tools") or []}
    prompt = _last_user(body)
    if EXTRACT_TOOL in tools:
        newest = prompt.split("Newest message:\n", 1)[-1].lower()
        facts = [{"text": fact, "language": "en"} for phrase, fact in MEMORY_FACTS.items() if phrase in newest]
        return tool_call(EXTRACT_TOOL, {"facts": facts}, 0)
    if DECIDE_TOOL not in tools:
        return None
    shown_part, _, new_part = prompt.partition("New candidate facts:\n")
    shown = re.findall(r"^(\d+)\. (.+)$", shown_part, re.MULTILINE)
    operations: list[dict[str, Any]] = []
    for candidate in re.findall(r"^- (.+) \(language: [a-z]+\)$", new_part, re.MULTILINE):
        topic = _MEMORY_TOPICS & set(re.findall(r"[a-z]+", candidate.lower()))
        target = next((int(n) for n, fact in shown if topic & set(re.findall(r"[a-z]+", fact.lower()))), None)
        if target is None:
            operations.append({"action": "ADD", "text": candidate, "language": "en", "reason": "new"})
        else:
            operations.append({"action": "UPDATE", "fact": target, "text": candidate, "reason": "changed"})
    return tool_call(DECIDE_TOOL, {"operations": operations}, 0)


def _chat_answer(body: dict[str, Any]) -> dict[str, Any] | None:
    for message in body.get("messages", []):
        content = message.get("content")
        if message.get("role") == "system" and isinstance(content, str) and content.startswith(_MEMORY_PROMPT):
            facts = [line[2:] for line in content.splitlines() if line.startswith("- ")]
            return text(f"I remember: {' | '.join(facts)}.")
    for message in body.get("messages", []):
        content = message.get("content")
        if message.get("role") == "system" and isinstance(content, str) and "Passages:" in content:
            first = _FIRST_PASSAGE.search(content)
            return text(f"According to {first.group(1) if first else 'nothing'} [1].")
    if not body.get("tools"):
        return text("Noted.")  # a chat turn with nothing to cite: no tool to call either
    return None


def stream_events(answer: dict[str, Any]) -> bytes:
    """A text completion as SSE chunks (a word per chunk), then ``[DONE]``."""
    content = answer["choices"][0]["message"].get("content") or ""
    pieces = [{"role": "assistant", "content": ""}] + [{"content": word} for word in re.findall(r"\S+\s*", content)]
    chunks = [
        {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        }
        for delta in pieces
    ]
    chunks.append(
        {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "scripted",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
    )
    return "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks).encode() + b"data: [DONE]\n\n"


def reply(body: dict[str, Any]) -> dict[str, Any] | str:
    """The scripted answer, or "down" / "hang" for the transport-level behaviours."""
    memory = _memory_answer(body)
    if memory is not None:
        return memory
    chat = _chat_answer(body)
    if chat is not None:
        return chat
    question = _question(body)
    turn = sum(1 for message in body.get("messages", []) if message.get("role") == "assistant")
    marker = _MARKER.search(question)
    mode = marker.group(1) if marker else ""
    clean = _MARKER.sub("", question).strip()
    results = _tool_results(body)
    if mode == "down":
        return "down"
    if mode == "plain":
        return text(f"Here are the queries:\n1. {clean}")
    if mode == "loop":
        return tool_call("retrieve", {"queries": [f"{clean} {turn}"]}, turn)
    if mode == "hang" and turn >= 1:
        return "hang"
    if mode.startswith("foreign:"):
        _, collection, file_id = mode.split(":", 2)
        if turn == 0:
            return tool_call("retrieve", {"queries": [clean], "collection_names": [collection]}, turn)
        if turn == 1:
            return tool_call("read_document", {"file_id": file_id}, turn)
        return text("DONE")
    if mode == "list":
        if turn == 0:
            return tool_call("list_documents", {"filters": None, "recent": True, "limit": 5}, turn)
        if turn == 1:
            return tool_call("read_document", {"file_id": results[0]["documents"][0]["file_id"]}, turn)
        return text("DONE")
    if turn == 0:
        return tool_call("retrieve", {"queries": [clean], "filters": None}, turn)
    if mode == "read" and turn == 1:
        return tool_call("read_document", {"file_id": results[0]["results"][0]["file_id"]}, turn)
    return text("DONE")


class ScriptedLLMServer:
    """``/v1/chat/completions`` on a free loopback port, in a thread; records what it was sent."""

    def __init__(self, hang_seconds: float = 6.0) -> None:
        self.hang_seconds = hang_seconds
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.paths: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # headers and body are two writes (Nagle + delayed ACK: 40 ms)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                server.authorizations.append(self.headers.get("Authorization"))
                server.paths.append(self.path)
                answer = EMBEDDING if self.path.endswith("/embeddings") else reply(body)
                if answer == "down":
                    self.close_connection = True
                    self.connection.close()
                    return
                if answer == "hang":
                    time.sleep(server.hang_seconds)
                    answer = text("DONE")
                streamed = bool(body.get("stream")) and isinstance(answer, dict)
                payload = (
                    stream_events(answer) if streamed and isinstance(answer, dict) else json.dumps(answer).encode()
                )
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream" if streamed else "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                # The agent may have given up waiting (its timeout) and closed the connection.
                with contextlib.suppress(OSError):
                    self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> ScriptedLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
