from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.types import Message, Scope

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.embedding.query_int8 import Int8QueryEmbedder
from rag_runtime.store import ChunkStore
from retrieval_agent.main import create_app
from retrieval_agent.settings import Settings

from ...conftest import AUTH, add_chunk, chunk_meta, make_settings  # noqa: TID252


def body(**overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"queries": ["When was the Eiffel Tower completed?"], "collection_names": ["kb-a"], "k": 3}
    values.update(overrides)
    return values


def test_search_returns_one_merged_list_with_citation_metadata(api: TestClient) -> None:
    response = api.post("/search", json=body(), headers=AUTH)
    assert response.status_code == 200, response.text
    data = response.json()
    assert set(data) == {"documents", "metadatas", "distances"}
    assert len(data["documents"]) == len(data["metadatas"]) == len(data["distances"]) == 1
    assert "Eiffel Tower in Paris" in data["documents"][0][0]
    meta = data["metadatas"][0][0]
    assert meta["name"] == meta["source"] == "paris.pdf"
    assert meta["file_id"] == "file-paris.pdf"
    assert meta["page"] == 1
    assert meta["headers"] == ["Intro"]
    distances = data["distances"][0]
    assert distances == sorted(distances, reverse=True)
    assert len(data["documents"][0]) == 3


def test_several_queries_merge_into_one_deduplicated_list(api: TestClient) -> None:
    response = api.post(
        "/search",
        json=body(queries=["Eiffel Tower", "powerhouse of the cell", "Eiffel Tower completed"], k=4),
        headers=AUTH,
    )
    assert response.status_code == 200
    documents = response.json()["documents"]
    assert len(documents) == 1
    assert len(documents[0]) == len(set(documents[0])) == 4
    joined = " ".join(documents[0])
    assert "Eiffel" in joined
    assert "Mitochondria" in joined


def test_same_text_in_two_tenants_is_returned_once(api: TestClient) -> None:
    response = api.post(
        "/search", json=body(queries=["capital of Denmark"], collection_names=["kb-a", "kb-c"], k=10), headers=AUTH
    )
    documents = response.json()["documents"][0]
    assert documents.count("Copenhagen is the capital of Denmark.") == 1


@pytest.mark.parametrize("hybrid", [True, False])
def test_tenant_isolation(app_factory: Callable[..., TestClient], seeded: ChunkStore, hybrid: bool) -> None:
    api = app_factory(make_settings(enable_hybrid_search=hybrid), seeded)
    response = api.post(
        "/search", json=body(queries=["secret code word BANANA"], collection_names=["kb-a"], k=100), headers=AUTH
    )
    assert response.status_code == 200
    metadatas = response.json()["metadatas"][0]
    assert metadatas, "kb-a has chunks"
    assert {meta["collection_name"] for meta in metadatas} == {"kb-a"}
    assert not any("BANANA" in text for text in response.json()["documents"][0])
    other = api.post("/search", json=body(queries=["secret code word"], collection_names=["kb-b"], k=1), headers=AUTH)
    assert "BANANA" in other.json()["documents"][0][0]


@pytest.mark.parametrize("hybrid", [True, False])
def test_distances_are_calibrated_relevance_on_every_path(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, hybrid: bool
) -> None:
    api = app_factory(make_settings(enable_hybrid_search=hybrid), seeded)
    answered = api.post("/search", json=body(k=5), headers=AUTH).json()["distances"][0]
    unrelated = api.post("/search", json=body(queries=["zebra migration in the Serengeti"], k=5), headers=AUTH)
    assert all(0.0 < value < 1.0 for value in answered)
    # One probability scale: the chunk that answers the question is far likelier relevant than the
    # best match of a question the tenant has nothing on.
    # A wide gap on one scale: the answering chunk is likelier relevant by an order of magnitude.
    best_unrelated = unrelated.json()["distances"][0][0]
    assert answered[0] > 0.4
    assert best_unrelated < 0.1
    assert answered[0] > 8 * best_unrelated


@pytest.mark.parametrize(("hybrid", "path"), [(True, "native_hybrid"), (False, "dense")])
def test_relevance_calibration_sets_the_distances(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, hybrid: bool, path: str
) -> None:
    # All weights zero: every hit is sigmoid(0) = 0.5, whatever its rank.
    calibration = json.dumps({path: [0.0, 0.0, 0.0]})
    api = app_factory(make_settings(enable_hybrid_search=hybrid, relevance_calibration=calibration), seeded)
    assert api.post("/search", json=body(k=3), headers=AUTH).json()["distances"][0] == [0.5, 0.5, 0.5]


def test_unknown_tenant_gives_empty_list_not_error(api: TestClient) -> None:
    response = api.post("/search", json=body(collection_names=["nobody"]), headers=AUTH)
    assert response.status_code == 200
    assert response.json() == {"documents": [[]], "metadatas": [[]], "distances": [[]]}


def test_blank_queries_without_messages_give_one_empty_list(api: TestClient) -> None:
    response = api.post("/search", json=body(queries=[""]), headers=AUTH)
    assert response.status_code == 200
    assert response.json() == {"documents": [[]], "metadatas": [[]], "distances": [[]]}


def test_messages_only_uses_last_user_message(api: TestClient) -> None:
    messages = [
        {"role": "user", "content": "Tell me about photosynthesis"},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "What is the powerhouse of the cell?"},
    ]
    response = api.post("/search", json={"messages": messages, "collection_names": ["kb-a"], "k": 1}, headers=AUTH)
    assert response.status_code == 200
    assert "Mitochondria" in response.json()["documents"][0][0]


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ({"queries": None, "messages": None}, "at least one of queries or messages"),
        ({"queries": "not a list"}, "queries"),
        ({"collection_names": []}, "collection_names"),
        ({"collection_names": ["bad name!"]}, "collection_names.0"),
        ({"collection_names": ["  kb-a  "]}, "collection_names.0"),  # the contract rule: refused, not trimmed
        ({"collection_names": ["kb-a", "kb-a\n"]}, "collection_names.1"),
        ({"collection_names": ["x" * 129]}, "collection_names.0"),
        ({"collection_names": ["a"] * 1001}, "collection_names"),
        ({"k": 0}, "k"),
        ({"k": "many"}, "k"),
        ({"k": True}, "k: Value error, must be a number, not true or false"),
        ({"messages": [{"role": "r" * 33, "content": "x"}]}, "messages.0.role"),
        ({"messages": [{"content": "no role"}]}, "messages.0.role"),
    ],
)
def test_invalid_requests_are_422_with_a_readable_body(api: TestClient, override: dict[str, Any], needle: str) -> None:
    response = api.post("/search", json=body(**override), headers=AUTH)
    assert response.status_code == 422
    data = response.json()
    assert data["status"] is False
    assert data["code"] == "INVALID_REQUEST"
    assert needle in data["error"]
    assert set(data) == {"status", "error", "code", "hint", "request_id"}  # the one flat shape (docs/contract.md)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic " + "x" * 40},
        {"Authorization": ("Bearer " + "ø" * 40).encode()},
    ],
)
def test_bad_key_is_401_with_www_authenticate(api: TestClient, headers: dict[str, str]) -> None:
    response = api.post("/search", json=body(), headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["code"] == "UNAUTHORIZED"


def test_double_slash_path_through_real_http(
    settings: Settings, seeded: ChunkStore, embedder: ContractEmbedder
) -> None:
    app = create_app(settings, embedder=embedder, store=seeded)

    async def run() -> tuple[httpx.Response, httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            # Open WebUI's configured base URL ends in "/", and it appends "/search".
            async with httpx.AsyncClient(transport=transport, base_url="http://retrieval:8000/") as client:
                double = await client.post("http://retrieval:8000//search", json=body(), headers=AUTH)
                single = await client.post("/search", json=body(), headers=AUTH)
        return double, single

    double, single = anyio.run(run)
    assert double.request.url.raw_path == b"//search"
    assert double.status_code == 200, double.text
    assert double.json() == single.json()


def test_double_slash_raw_asgi_path(settings: Settings, seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    app = create_app(settings, embedder=embedder, store=seeded)
    import json

    sent: list[Message] = []

    async def run() -> None:
        payload = json.dumps(body()).encode()
        messages: list[Message] = [{"type": "http.request", "body": payload, "more_body": False}]

        async def receive() -> Message:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            sent.append(message)

        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "//search",
            "raw_path": b"//search",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"content-type", b"application/json"), (b"authorization", AUTH["Authorization"].encode())],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 8000),
        }
        async with app.router.lifespan_context(app):
            await app(scope, receive, send)

    anyio.run(run)
    assert sent[0]["status"] == 200
    assert b"Eiffel" in b"".join(message.get("body", b"") for message in sent[1:])


def test_per_query_result_sets_when_configured(app_factory: Callable[..., TestClient], seeded: ChunkStore) -> None:
    api = app_factory(make_settings(search_result_sets="per_query"), seeded)
    data = api.post("/search", json=body(queries=["Eiffel", "cell"], k=2), headers=AUTH).json()
    assert len(data["documents"]) == 2


@pytest.mark.parametrize("hybrid", [True, False])
def test_pending_chunks_never_appear(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, embedder: ContractEmbedder, hybrid: bool
) -> None:
    draft = "The Eiffel Tower in Paris was completed in 1889: a draft a run is still writing."
    meta = chunk_meta("kb-a", "draft.pdf", 1, 0, ingest_state="pending")
    anyio.run(lambda: add_chunk(seeded, embedder, "draft-0", draft, meta))
    api = app_factory(make_settings(enable_hybrid_search=hybrid), seeded)
    documents = api.post("/search", json=body(k=100), headers=AUTH).json()["documents"][0]
    assert "Eiffel Tower in Paris" in documents[0]
    assert draft not in documents


@pytest.mark.parametrize("hybrid", [True, False])
def test_search_never_mixes_two_versions_of_a_file(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, embedder: ContractEmbedder, hybrid: bool
) -> None:
    # A commit in flight: version 2 of paris.pdf is live and version 1 is not removed yet.
    new_chunks = [
        "The Eiffel Tower in Paris was completed in 1889, revised edition.",
        "The Eiffel Tower is about 330 metres tall.",
    ]
    for index, text in enumerate(new_chunks):
        meta = chunk_meta("kb-a", "paris.pdf", index + 1, index, ingest_version="v2", ingest_seq=2)
        anyio.run(add_chunk, seeded, embedder, f"paris-v2-{index}", text, meta)
    # The version fields are internal: returned only with SEARCH_METADATA_FIELDS=*.
    api = app_factory(make_settings(enable_hybrid_search=hybrid, search_metadata_fields="*"), seeded)
    data = api.post("/search", json=body(k=10), headers=AUTH).json()
    paris = [
        (meta, text)
        for meta, text in zip(data["metadatas"][0], data["documents"][0], strict=True)
        if meta["file_id"] == "file-paris.pdf"
    ]
    # Version 2's two chunks in one window; version 1's split 0 never joins it.
    assert [(meta["ingest_seq"], meta["window"]) for meta, _ in paris] == [(2, [0, 1])]
    assert paris[0][1] == "\n\n".join(new_chunks)
    assert not any("for the World's Fair." in text for text in data["documents"][0])


def test_norwegian_tenant_is_searched_with_the_norwegian_stemmer(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, embedder: ContractEmbedder
) -> None:
    texts = ["Hundene løp over broene i byen.", "Regjeringen la fram statsbudsjettet i oktober."]
    for index, text in enumerate(texts):
        meta = chunk_meta("kb-no", "norsk.txt", index + 1, index, languages=["no"])
        anyio.run(add_chunk, seeded, embedder, f"no-{index}", text, meta)
    api = app_factory(make_settings(search_window_chars=0), seeded)  # the ranked chunk alone
    data = api.post("/search", json=body(queries=["hund bro"], collection_names=["kb-no"], k=1), headers=AUTH).json()
    assert data["documents"] == [[texts[0]]]
    assert 'search_path_total{path="native_hybrid"} 1.0' in api.get("/metrics", headers=AUTH).text


@pytest.mark.parametrize(
    "retrieval",
    [
        {"enable_hybrid_search": True},
        {"enable_hybrid_search": True, "hybrid_fusion": "rrf"},
        {"enable_hybrid_search": False},
    ],
    ids=["zscore", "rrf", "dense"],
)
def test_identical_texts_still_fill_k_distinct_results(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, embedder: ContractEmbedder, retrieval: dict[str, Any]
) -> None:
    # One Eiffel text stored in five files: the best five candidates are all the same text.
    twin = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."
    for index in range(5):
        meta = chunk_meta("kb-a", f"twin-{index}.pdf", 1, 0)
        anyio.run(add_chunk, seeded, embedder, f"twin-{index}", twin, meta)
    # Windows fetch spare candidates up front; without them the gap is filled by a deeper fetch.
    api = app_factory(make_settings(**retrieval, search_window_chars=0), seeded)
    response = api.post("/search", json=body(queries=["When was the Eiffel Tower completed?"], k=5), headers=AUTH)
    assert response.status_code == 200, response.text
    documents = response.json()["documents"][0]
    assert documents.count(twin) == 1
    assert len(documents) == len(set(documents)) == 5
    metrics = api.get("/metrics", headers=AUTH).text
    assert "dedup_refetches_total 1.0" in metrics
    # The deeper fetch reused the query's vectors: the models ran once.
    assert 'retrieval_stage_duration_seconds_count{stage="embed"} 1.0' in metrics


ADJUSTED = "x-rag-request-adjusted"


def test_a_long_pasted_query_is_shortened_and_still_searched(api: TestClient) -> None:
    question = "When was the Eiffel Tower completed?"
    response = api.post("/search", json=body(queries=["lorem ipsum " * 400 + question]), headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.headers[ADJUSTED] == "query-truncated"
    # The end of the text, where the question is, survives the cut.
    assert "Eiffel Tower in Paris" in response.json()["documents"][0][0]
    assert (
        'search_request_adjustments_total{adjustment="query-truncated"} 1.0' in api.get("/metrics", headers=AUTH).text
    )


def test_multimodal_list_content_is_searched_by_its_text_parts(api: TestClient) -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is the powerhouse of the cell?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        }
    ]
    response = api.post("/search", json={"messages": messages, "collection_names": ["kb-a"], "k": 1}, headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.headers[ADJUSTED] == "message-parts"
    assert "Mitochondria" in response.json()["documents"][0][0]


def test_a_long_chat_keeps_its_last_messages(api: TestClient) -> None:
    old = [{"role": "user", "content": "Tell me about the Eiffel Tower"}] * 60
    messages = [*old, {"role": "user", "content": "What is the powerhouse of the cell?"}]
    response = api.post("/search", json={"messages": messages, "collection_names": ["kb-a"], "k": 1}, headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.headers[ADJUSTED] == "messages-trimmed"
    assert "Mitochondria" in response.json()["documents"][0][0]


def test_a_large_k_is_clamped(api: TestClient) -> None:
    response = api.post("/search", json=body(k=500), headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.headers[ADJUSTED] == "k-clamped"
    assert 1 <= len(response.json()["documents"][0]) <= 100


def test_a_request_within_the_limits_is_not_marked(api: TestClient) -> None:
    assert ADJUSTED not in api.post("/search", json=body(), headers=AUTH).headers


def test_metadata_carries_what_citations_need_and_nothing_internal(api: TestClient) -> None:
    meta = api.post("/search", json=body(), headers=AUTH).json()["metadatas"][0][0]
    assert {"name", "source", "file_id", "page", "headers"} <= set(meta)
    assert not {"user_id", "ingest_version", "ingest_seq", "ingest_state", "content_hash", "indexed_at"} & set(meta)
    assert set(meta) <= {
        "name",
        "source",
        "file_id",
        "collection_name",
        "page",
        "headers",
        "title",
        "authors",
        "languages",
        "extractor",
        "data",
        "window",
    }


def test_a_star_returns_the_stored_meta_verbatim(
    app_factory: Callable[..., TestClient], settings: Settings, seeded: ChunkStore
) -> None:
    api = app_factory(settings.model_copy(update={"search_metadata_fields": "*"}), seeded)
    meta = api.post("/search", json=body(), headers=AUTH).json()["metadatas"][0][0]
    assert (meta["ingest_version"], meta["ingest_state"], meta["split_id"]) == ("v1", "live", 0)


# Unrelated chunks score within a hair of each other on this corpus (relevance 0.0076 and 0.0074 for
# two Danish cities under an Eiffel Tower query): int8 queries may order those differently, never
# hits that fp32 queries separate by more than this.
NEAR_TIE = 0.001


def near_tie_groups(documents: list[str], relevances: list[float]) -> dict[str, int]:
    """Each document's group: consecutive hits whose relevance differs by at most NEAR_TIE share one."""
    groups: dict[str, int] = {}
    group = 0
    for index, (document, relevance) in enumerate(zip(documents, relevances, strict=True)):
        if index and relevances[index - 1] - relevance > NEAR_TIE:
            group += 1
        groups[document] = group
    return groups


def test_the_services_own_embedder_queries_on_the_int8_copy_and_ranks_as_fp32_queries_do(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, tmp_path: Path
) -> None:
    own = app_factory(make_settings(fastembed_cache_path=tmp_path / "fastembed"), seeded, embedder=None)
    fp32 = app_factory(make_settings(), seeded)  # the session's fp32 embedder, injected
    assert isinstance(own.app.state.search.embedder.query_dense, Int8QueryEmbedder)  # type: ignore[attr-defined]

    for query in ("When was the Eiffel Tower completed?", "powerhouse of the cell", "Berlin wall"):
        ranked = own.post("/search", json=body(queries=[query], collection_names=["kb-a", "kb-b"], k=3), headers=AUTH)
        assert ranked.status_code == 200, ranked.text
        # Two more fp32 hits: a near-tie may reach past the third.
        expected = fp32.post(
            "/search", json=body(queries=[query], collection_names=["kb-a", "kb-b"], k=5), headers=AUTH
        ).json()
        groups = near_tie_groups(expected["documents"][0], expected["distances"][0])
        expected_groups = [groups[document] for document in expected["documents"][0][:3]]
        assert [groups.get(document) for document in ranked.json()["documents"][0]] == expected_groups


# Half an emoji, as a JavaScript client leaves it when it cuts a string: valid JSON, no valid text.
LONE_SURROGATE = "\ud83d"


def raw_post(api: TestClient, payload: dict[str, Any]) -> Any:
    """``payload`` as ASCII JSON (the surrogate as its ``\\ud83d`` escape, which no UTF-8 encoder would take)."""
    return api.post("/search", content=json.dumps(payload), headers={**AUTH, "Content-Type": "application/json"})


def test_a_lone_surrogate_in_a_query_is_replaced_and_searched(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, tmp_path: Path
) -> None:
    # The service's own query embedder, whose tokenizer raises TypeError on a lone surrogate.
    api = app_factory(make_settings(fastembed_cache_path=tmp_path / "fastembed"), seeded, embedder=None)
    response = raw_post(api, body(queries=[f"When was the Eiffel Tower completed? {LONE_SURROGATE}"]))
    assert response.status_code == 200, response.text
    assert response.headers[ADJUSTED] == "unicode-replaced"
    assert "Eiffel Tower in Paris" in response.json()["documents"][0][0]
    assert (
        'search_request_adjustments_total{adjustment="unicode-replaced"} 1.0' in api.get("/metrics", headers=AUTH).text
    )


@pytest.mark.parametrize(
    "content",
    [
        f"When was the Eiffel Tower completed? {LONE_SURROGATE}",
        [{"type": "text", "text": f"When was the Eiffel Tower completed? {LONE_SURROGATE}"}],
    ],
)
def test_a_lone_surrogate_in_a_message_is_replaced_and_searched(api: TestClient, content: Any) -> None:
    response = raw_post(api, body(queries=None, messages=[{"role": "user", "content": content}]))
    assert response.status_code == 200, response.text
    assert "unicode-replaced" in response.headers[ADJUSTED].split(",")
    assert "Eiffel Tower in Paris" in response.json()["documents"][0][0]


def test_the_first_hits_and_their_relevance_do_not_depend_on_k(api: TestClient) -> None:
    """Open WebUI asks for its top_k (3 by default): the best hits and the probability each is relevant
    must be those of a larger k, or a relevance threshold would mean something else at each k."""
    answers = {
        k: api.post("/search", json=body(queries=["Eiffel Tower"], k=k), headers=AUTH).json() for k in (1, 3, 10)
    }
    widest = answers[10]
    assert len(widest["documents"][0]) > 3
    for k in (1, 3):
        assert answers[k]["documents"][0] == widest["documents"][0][:k]
        assert answers[k]["distances"][0] == pytest.approx(widest["distances"][0][:k], abs=1e-9)
