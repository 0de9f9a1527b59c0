"""Every request shape the AarhusAI Open WebUI fork sends to POST /search, built as the fork builds it.

The fork (``retrieval/external_service.py``) posts ``requests.post(f"{url}/search", json=payload)``:
the body is ``json.dumps(payload, allow_nan=False)`` (non-ASCII escaped), ``Content-Type:
application/json``, the Bearer key, and with ENABLE_FORWARD_USER_INFO_HEADERS the
``X-OpenWebUI-User-*`` headers. ``payload`` is always ``queries``, ``collection_names`` and ``k``;
``messages`` is added when it is not None. Three call sites fill it:

- chat files and knowledge (``get_sources_from_items``): ``queries`` are Open WebUI's generated
  queries, or ``[last user message or ""]``; ``k`` is TOP_K; one item's collection names.
- bypass mode (RAG_EXTERNAL_BYPASS_QUERY_GENERATION): ``queries = [last user message or ""]``
  (the raw text, the first text part of a multimodal turn) plus the raw chat, trimmed by
  ``trim_messages_for_external``: the last RAG_EXTERNAL_MESSAGE_COUNT messages (0 keeps all),
  only ``role == "user"`` ones with RAG_EXTERNAL_USER_MESSAGES_ONLY, each reduced to
  ``{"role": m.get("role", ""), "content": m.get("content", "")}`` (content as sent to the model:
  a string, a list of text and image parts, or None on a tool-call turn).
- the knowledge tool (``query_knowledge_files``): ``queries=[<the LLM's query>]``, ``k=count`` as
  the LLM gave it, the attached knowledge's names (or up to 50 accessible knowledge bases), and
  the trimmed chat.

The older fork also sent ``retrieval_query_generation_prompt_template`` (Open WebUI's own
placeholders). The base URL may end in "/", so the path can be ``//search``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from rag_runtime.store import ChunkStore
from retrieval_agent.search.leniency import MAX_MESSAGE_CHARS

from ...conftest import AUTH, make_settings  # noqa: TID252

ADJUSTED = "x-rag-request-adjusted"
EMPTY: dict[str, list[list[Any]]] = {"documents": [[]], "metadatas": [[]], "distances": [[]]}
KB = "kb-a"
EIFFEL = "When was the Eiffel Tower completed?"
CELL = "What is the powerhouse of the cell?"
# Open WebUI ids are uuid4 strings; a knowledge base's id is its collection name.
KB_UUID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "iVBORw0KGgo" * 2000}}


def fork_post(
    api: TestClient,
    payload: dict[str, Any],
    *,
    base_url: str = "http://testserver",
    headers: dict[str, str] | None = None,
) -> Any:
    """What ``query_external_retrieval`` sends: ``requests.post(f"{url}/search", json=payload)``."""
    body = json.dumps(payload, allow_nan=False).encode("utf-8")  # requests' json= encoding
    sent = {"Content-Type": "application/json", **AUTH, **(headers or {})}
    return api.post(f"{base_url}/search", content=body, headers=sent)


def payload(queries: list[str], *, k: Any = 5, names: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """The fork's payload: always queries, collection_names and k; ``messages`` only when given."""
    return {"queries": queries, "collection_names": [KB] if names is None else names, "k": k, **extra}


def trimmed(messages: list[dict[str, Any]], *, count: int, user_only: bool) -> list[dict[str, Any]]:
    """``trim_messages_for_external``, as the fork writes it."""
    candidates = [m for m in messages if m.get("role") == "user"] if user_only else messages
    return [{"role": m.get("role", ""), "content": m.get("content", "")} for m in candidates[-count:]]


def last_user_message(messages: list[dict[str, Any]]) -> str:
    """Open WebUI's ``get_last_user_message`` (the first text part of list content) ``or ""``."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                texts = [part["text"] for part in content if part.get("type") == "text"]
                return texts[0] if texts else ""
            return str(content or "")
    return ""


def bypass(chat: list[dict[str, Any]], *, count: int = 2, user_only: bool = True, **extra: Any) -> dict[str, Any]:
    """Bypass mode; the defaults are the parent stack's (RAG_EXTERNAL_MESSAGE_COUNT=2, user messages only)."""
    messages = trimmed(chat, count=count, user_only=user_only)
    return payload([last_user_message(chat)], messages=messages, **extra)


# A chat as Open WebUI sends it to the model: system prompt, turns, a native tool call and its result.
CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful assistant. Answer from the attached documents."},
    {"role": "user", "content": "Tell me about Paris"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "query_knowledge_files"}}],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '[{"content": "The Eiffel Tower ...", "source": "x"}]'},
    {"role": "assistant", "content": "Paris has the Eiffel Tower."},
    {"role": "user", "content": EIFFEL},
]


def texts(response: Any) -> list[str]:
    documents: list[list[str]] = response.json()["documents"]
    assert len(documents) == 1, "one merged result set: Open WebUI reads only the first"
    return documents[0]


def chunks_shown(response: Any) -> int:
    """Stored chunks the results show: a result's window may join neighbouring chunks of its file."""
    return sum(last - first + 1 for first, last in (meta["window"] for meta in response.json()["metadatas"][0]))


def assert_finds(response: Any, needle: str, *, adjusted: str | None = None) -> None:
    assert response.status_code == 200, response.text
    assert needle in texts(response)[0]
    if adjusted is None:
        assert ADJUSTED not in response.headers
    else:
        assert response.headers[ADJUSTED] == adjusted


# --- get_sources_from_items: Open WebUI generated the queries itself --------------------------------


def test_generated_queries_without_messages(api: TestClient) -> None:
    response = fork_post(api, payload(["Eiffel Tower completion year", "Paris World's Fair 1889", "Eiffel"], k=3))
    assert_finds(response, "Eiffel Tower in Paris")
    assert len(texts(response)) == 3
    assert len(response.json()["metadatas"][0]) == len(response.json()["distances"][0]) == 3


def test_more_than_ten_generated_queries_keep_the_first_ten(api: TestClient) -> None:
    # An LLM asked for 1-3 queries may still write more; the first ten are searched.
    queries = [f"Eiffel Tower completed, variant {i}" for i in range(10)] + [CELL, "Mitochondria ATP"]
    assert_finds(fork_post(api, payload(queries, k=1)), "Eiffel Tower in Paris", adjusted="queries-dropped")


def test_no_query_and_no_chat_is_an_empty_result(api: TestClient) -> None:
    # Query generation gave nothing and there is no user message: [get_last_user_message(...) or ""].
    response = fork_post(api, payload([""]))
    assert response.status_code == 200
    assert response.json() == EMPTY


# --- bypass mode: the raw last user message and the raw chat ------------------------------------------


def test_parent_stack_bypass_two_user_messages(api: TestClient) -> None:
    body = bypass(CHAT)
    assert body["messages"] == [
        {"role": "user", "content": "Tell me about Paris"},
        {"role": "user", "content": EIFFEL},
    ]
    assert_finds(fork_post(api, body), "Eiffel Tower in Paris")


def test_bypass_with_every_role_system_assistant_tool_and_a_null_content(api: TestClient) -> None:
    body = bypass(CHAT, count=10, user_only=False)
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert body["messages"][2]["content"] is None
    assert "tool_calls" not in body["messages"][2]  # trim keeps role and content only
    assert_finds(fork_post(api, body), "Eiffel Tower in Paris")


def test_a_message_without_a_role_is_sent_with_an_empty_role(api: TestClient) -> None:
    chat = [{"content": "a message some filter left without a role"}, {"role": "user", "content": CELL}]
    body = bypass(chat, user_only=False)
    assert body["messages"][0] == {"role": "", "content": "a message some filter left without a role"}
    assert_finds(fork_post(api, body), "Mitochondria")


def test_a_multimodal_turn_text_and_image_parts(api: TestClient) -> None:
    chat = [{"role": "user", "content": [{"type": "text", "text": CELL}, IMAGE]}]
    body = bypass(chat)
    assert body["queries"] == [CELL]
    assert_finds(fork_post(api, body), "Mitochondria", adjusted="message-parts")


def test_a_pasted_photo_of_several_megabytes_still_gets_sources(api: TestClient) -> None:
    # A phone photo base64-encoded is 4-8 MB; the default MAX_REQUEST_BYTES must let it through.
    photo = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + "A" * (6 * 1024 * 1024)}}
    chat = [{"role": "user", "content": [{"type": "text", "text": CELL}, photo]}]
    assert_finds(fork_post(api, bypass(chat)), "Mitochondria", adjusted="message-parts")


def test_an_image_only_turn_has_nothing_to_search(api: TestClient) -> None:
    chat = [{"role": "user", "content": [IMAGE]}]
    body = bypass(chat)
    assert body["queries"] == [""]
    response = fork_post(api, body)
    assert response.status_code == 200, response.text
    assert response.headers[ADJUSTED] == "message-parts"
    assert response.json() == EMPTY


def test_a_long_pasted_text_is_shortened_in_query_and_message(api: TestClient) -> None:
    paste = "Here is my report. " + "lorem ipsum dolor sit amet " * 600 + EIFFEL
    assert len(paste) > MAX_MESSAGE_CHARS
    body = bypass([{"role": "user", "content": paste}], k=2)
    response = fork_post(api, body)
    assert response.status_code == 200, response.text
    assert response.headers[ADJUSTED] == "query-truncated,message-truncated"
    # The question at the end survives the head+tail cut: its words reach the BM25 leg, which lifts
    # the Eiffel chunk into the top two; by the dense leg alone (the lorem-ipsum head) it ranks last.
    assert any("Eiffel Tower in Paris" in text for text in texts(response))
    metrics = api.get("/metrics", headers=AUTH).text
    assert 'search_request_adjustments_total{adjustment="query-truncated"} 1.0' in metrics
    assert 'search_request_adjustments_total{adjustment="message-truncated"} 1.0' in metrics


def test_message_count_zero_forwards_the_whole_chat(api: TestClient) -> None:
    # RAG_EXTERNAL_MESSAGE_COUNT=0: candidates[-0:] is every message.
    chat = [{"role": "user", "content": "Tell me about the Eiffel Tower"}] * 70 + [{"role": "user", "content": CELL}]
    body = bypass(chat, count=0)
    assert len(body["messages"]) == 71
    assert_finds(fork_post(api, body), "Mitochondria", adjusted="messages-trimmed")


def test_user_messages_only_with_no_user_message_sends_an_empty_chat(api: TestClient) -> None:
    body = bypass([{"role": "system", "content": "You are helpful."}])
    assert body == payload([""], messages=[])
    response = fork_post(api, body)
    assert response.status_code == 200
    assert response.json() == EMPTY


def test_an_empty_queries_list_with_messages_searches_the_last_user_message(api: TestClient) -> None:
    # Not what today's fork sends (queries is never empty), but the reference schema allows it.
    response = fork_post(api, payload([], messages=[{"role": "user", "content": CELL}]))
    assert_finds(response, "Mitochondria")


def test_messages_only_without_queries(api: TestClient) -> None:
    body = {"messages": [{"role": "user", "content": CELL}], "collection_names": [KB], "k": 1}
    assert_finds(fork_post(api, body), "Mitochondria")


def test_unicode_query_and_chat(api: TestClient) -> None:
    question = "Hvor ligger Aarhus? Byen i Jylland 🇩🇰 (æøå)"
    body = bypass([{"role": "user", "content": question}])
    encoded = json.dumps(body, allow_nan=False)
    assert "\\u00e6" in encoded  # requests escapes non-ASCII
    assert_finds(fork_post(api, body), "Aarhus is the second largest city")


def test_raw_utf8_json_is_read_too(api: TestClient) -> None:
    body = json.dumps(payload(["Aarhus, Jylland – æøå"], k=1), ensure_ascii=False).encode("utf-8")
    response = api.post("/search", content=body, headers={"Content-Type": "application/json", **AUTH})
    assert_finds(response, "Aarhus is the second largest city")


# --- the knowledge tool (query_knowledge_files) --------------------------------------------------------


def test_knowledge_tool_call_with_count_and_chat(api: TestClient) -> None:
    body = payload(["Eiffel Tower construction"], k=10, names=[KB, "file-5f0c2c1e-3b7a-4c1e-9d2f-0a1b2c3d4e5f"])
    body["messages"] = trimmed(CHAT, count=2, user_only=True)
    response = fork_post(api, body)
    assert_finds(response, "Eiffel Tower in Paris")
    # Every kb-a chunk is there (five, biology.pdf's two in one window), nothing from other tenants.
    assert (len(texts(response)), chunks_shown(response)) == (4, 5)
    assert {meta["collection_name"] for meta in response.json()["metadatas"][0]} == {KB}


@pytest.mark.parametrize(("k", "returned"), [(1, 1), (5.0, 5), (None, 5)])
def test_count_as_the_llm_gave_it(api: TestClient, k: Any, returned: int) -> None:
    # The tool coerces only a string count; a float or an explicit null reaches the wire as it is.
    response = fork_post(api, payload(["Eiffel Tower"], k=k))
    assert response.status_code == 200, response.text
    assert chunks_shown(response) == returned
    assert ADJUSTED not in response.headers


def test_k_absent_is_five(api: TestClient) -> None:
    body = {"queries": ["Eiffel Tower"], "collection_names": [KB]}
    response = fork_post(api, body)
    assert response.status_code == 200
    assert chunks_shown(response) == 5


def test_a_huge_count_is_clamped(api: TestClient) -> None:
    response = fork_post(api, payload(["Eiffel Tower"], k=10_000))
    assert response.status_code == 200
    assert response.headers[ADJUSTED] == "k-clamped"
    assert chunks_shown(response) == 5  # every kb-a chunk, well under the clamp


def test_duplicate_collection_names(api: TestClient) -> None:
    response = fork_post(api, payload(["capital of Denmark"], k=10, names=[KB, KB, "kb-c", KB]))
    assert response.status_code == 200
    documents = texts(response)
    assert len(documents) == len(set(documents))
    assert documents.count("Copenhagen is the capital of Denmark.") == 1


def test_fifty_accessible_knowledge_bases(api: TestClient) -> None:
    # No knowledge attached and no knowledge_ids: the tool searches up to 50 accessible knowledge bases.
    names = [f"{i:08d}-7425-40de-944b-e07fc1f90ae7" for i in range(48)] + ["kb-b", KB]
    response = fork_post(api, payload(["secret code word"], k=3, names=names))
    assert_finds(response, "BANANA")
    assert {meta["collection_name"] for meta in response.json()["metadatas"][0]} == {"kb-b", KB}


def test_knowledge_base_uuid_and_legacy_hash_names(api: TestClient) -> None:
    names = [KB_UUID, "user-memory-0f8fad5b-d9cb-469f-a165-70867728950e", "a" * 63, KB]
    assert_finds(fork_post(api, payload([EIFFEL], k=1, names=names)), "Eiffel Tower in Paris")


# --- transport: URL joining, headers, the older fork's template ----------------------------------------


@pytest.mark.parametrize("base_url", ["http://testserver", "http://testserver/"])
def test_base_url_with_and_without_a_trailing_slash(api: TestClient, base_url: str) -> None:
    response = fork_post(api, payload([EIFFEL], k=1), base_url=base_url)
    expected = b"//search" if base_url.endswith("/") else b"/search"
    assert response.request.url.raw_path == expected
    assert_finds(response, "Eiffel Tower in Paris")


def test_forwarded_user_info_headers_are_ignored(api: TestClient) -> None:
    headers = {
        "X-OpenWebUI-User-Name": "Jens%20J%C3%B8rgensen",  # quote(user.name, safe=" ") keeps spaces
        "X-OpenWebUI-User-Id": "0f8fad5b-d9cb-469f-a165-70867728950e",
        "X-OpenWebUI-User-Email": "jens@example.dk",
        "X-OpenWebUI-User-Role": "user",
        "X-OpenWebUI-Chat-Id": "chat-1",
    }
    assert_finds(fork_post(api, payload([EIFFEL], k=1), headers=headers), "Eiffel Tower in Paris")


def test_the_older_fork_sends_its_query_generation_template(api: TestClient) -> None:
    template = (
        "### Task:\nGenerate 1-3 search queries.\nToday is {{CURRENT_DATE}}\n<chat_history>\n{{MESSAGES:END:4}}\n"
    )
    body = bypass([{"role": "user", "content": EIFFEL}], retrieval_query_generation_prompt_template=template)
    assert_finds(fork_post(api, body), "Eiffel Tower in Paris")


# --- bypass mode with the service's own query generation (an LLM configured) ---------------------------


def generating(prompts: list[str], queries: list[str]) -> FunctionModel:
    def generate(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(str(messages[-1].parts[-1].content))  # type: ignore[union-attr]
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"queries": queries})])

    return FunctionModel(generate)


@pytest.mark.parametrize(
    "chat",
    [
        [{"role": "user", "content": "Tell me about biology"}, {"role": "user", "content": "and its energy?"}],
        [{"role": "user", "content": [{"type": "text", "text": "and its energy?"}, IMAGE]}],
        # A paste longer than a query may be: the query and the message are shortened alike, so the
        # request is still recognised as bypass mode and the LLM writes the queries.
        [{"role": "user", "content": "lorem ipsum dolor " * 800 + "and its energy?"}],
    ],
    ids=["text", "multimodal", "long-paste"],
)
def test_bypass_mode_hands_the_chat_to_query_generation(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, chat: list[dict[str, Any]]
) -> None:
    prompts: list[str] = []
    model = generating(prompts, ["mitochondria ATP"])
    api = app_factory(make_settings(enable_query_generation=True), seeded, query_model=model)
    response = fork_post(api, bypass(chat, k=1))
    assert response.status_code == 200, response.text
    assert len(prompts) == 1
    assert "and its energy?" in prompts[0]
    assert "Mitochondria" in texts(response)[0]


def test_a_tool_query_is_searched_as_given(app_factory: Callable[..., TestClient], seeded: ChunkStore) -> None:
    prompts: list[str] = []
    model = generating(prompts, ["mitochondria ATP"])
    api = app_factory(make_settings(enable_query_generation=True), seeded, query_model=model)
    body = payload([EIFFEL], k=1, messages=[{"role": "user", "content": "Tell me about Paris"}])
    assert_finds(fork_post(api, body), "Eiffel Tower in Paris")
    assert prompts == []


# --- truly malformed: 422 INVALID_REQUEST ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (payload(["q"], names=[]), "collection_names"),
        ({"queries": ["q"], "k": 5}, "collection_names"),
        (payload(["q"], names=["Knowledge Base 1"]), "collection_names.0"),
        (payload(["q"], k=0), "k"),
        (payload(["q"], k=-3), "k"),
        (payload(["q"], k=2.5), "k"),
        (payload("q"), "queries"),  # type: ignore[arg-type]
        (payload(["q"], messages=[{"content": "no role key at all"}]), "messages.0.role"),
        ({"collection_names": [KB], "k": 5}, "at least one of queries or messages"),
    ],
    ids=[
        "no-collections",
        "collections-missing",
        "collection-name-with-spaces",
        "k-zero",
        "k-negative",
        "k-fraction",
        "queries-not-a-list",
        "message-without-role",
        "nothing-to-search",
    ],
)
def test_malformed_requests_are_422(api: TestClient, body: dict[str, Any], field: str) -> None:
    response = fork_post(api, body)
    assert response.status_code == 422, response.text
    data = response.json()
    assert (data["status"], data["code"]) == (False, "INVALID_REQUEST")
    assert field in data["error"]
