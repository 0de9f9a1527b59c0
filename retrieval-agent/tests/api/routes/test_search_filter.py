"""POST /search with a metadata ``filter``: only matching documents of the requested tenants, on every
retrieval path (dense, hybrid, several queries, rerank, dedup refetch, agentic), and a 422 naming a
key that cannot be filtered on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from pydantic_ai.messages import ModelMessage, ModelResponse
from qdrant_client import models

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore, chunk_point, close_store, open_store
from retrieval_agent.settings import Settings

from ...agent.agent_support import RecordingReranker, Script, call, say, tool_returns  # noqa: TID252
from ...conftest import AUTH, RecordingStore, chunk_meta, create_collection, make_settings  # noqa: TID252

ATTRIBUTES = "dept:keyword,year:integer"

# (tenant, file, split, text, document metadata)
FILES: list[tuple[str, str, int, str, dict[str, Any]]] = [
    (
        "kb-a",
        "budget-2024.pdf",
        0,
        "The 2024 budget allocates funds to sales and marketing.",
        {
            "format": "pdf",
            "tags": ["finance"],
            "category": "reports",
            "indexed_at": "2024-02-01T00:00:00+00:00",
            "attributes": {"dept": "sales", "year": 2024},
        },
    ),
    (
        "kb-a",
        "budget-2024.pdf",
        1,
        "The budget for 2024 also covers travel and training costs.",
        {
            "format": "pdf",
            "tags": ["finance"],
            "category": "reports",
            "indexed_at": "2024-02-01T00:00:00+00:00",
            "attributes": {"dept": "sales", "year": 2024},
        },
    ),
    (
        "kb-a",
        "budget-notes.md",
        0,
        "Budgettet for 2023 dækker juridiske udgifter og advokatsalærer.",
        {
            "format": "md",
            "tags": ["finance", "draft"],
            "category": "notes",
            "indexed_at": "2024-08-01T00:00:00+00:00",
            "languages": ["da"],
            "attributes": {"dept": "legal", "year": 2023},
        },
    ),
    (
        "kb-a",
        "budget-memo.docx",
        0,
        "Memo: the 2022 budget was closed without changes.",
        {
            "format": "docx",
            "category": "reports",
            "indexed_at": "2025-01-10T00:00:00+00:00",
            "attributes": {"dept": "sales", "year": 2022},
        },
    ),
    (
        "kb-b",
        "budget-secret.pdf",
        0,
        "The secret 2024 budget of tenant B: BANANA.",
        {
            "format": "pdf",
            "tags": ["finance"],
            "category": "reports",
            "indexed_at": "2024-02-01T00:00:00+00:00",
            "attributes": {"dept": "sales", "year": 2024},
        },
    ),
    # One text in three files of one tenant: the best candidates collapse into one hit.
    *(
        (
            "kb-dup",
            f"twin-{index}.pdf",
            0,
            "The annual budget review takes place every March.",
            {"format": "pdf", "indexed_at": "2024-02-01T00:00:00+00:00"},
        )
        for index in range(3)
    ),
    (
        "kb-dup",
        "other.pdf",
        0,
        "Budget reviews compare planned and actual spending.",
        {"format": "pdf", "indexed_at": "2024-02-01T00:00:00+00:00"},
    ),
    (
        "kb-dup",
        "other.md",
        0,
        "The annual budget review takes place every March, in the board room.",
        {"format": "md", "indexed_at": "2024-02-01T00:00:00+00:00"},
    ),
]
KB_A = {"budget-2024.pdf", "budget-notes.md", "budget-memo.docx"}


def filter_settings(**overrides: Any) -> Settings:
    return make_settings(indexed_attributes=ATTRIBUTES, **overrides)


@pytest.fixture(scope="module")
def filtered(embedder: ContractEmbedder) -> Iterator[ChunkStore]:
    """kb-a, kb-b and kb-dup, as ingestion writes them with document metadata (one store per module)."""
    settings = filter_settings()
    store = open_store(settings)
    vectors = embedder.embed_documents([text for _, _, _, text, _ in FILES], with_sparse=True)
    points = []
    for index, (tenant, name, split, text, document) in enumerate(FILES):
        meta = chunk_meta(tenant, name, 1, split, **document)
        sparse = vectors.sparse[index] if vectors.sparse is not None else None
        points.append(chunk_point(f"{tenant}-{index}", text, meta, dense=vectors.dense[index], sparse=sparse))

    async def seed() -> None:
        await create_collection(store, settings)
        await store.upsert(points)

    anyio.run(seed)
    yield store
    anyio.run(close_store, store)


def search(api: TestClient, document_filter: dict[str, Any] | None, **overrides: Any) -> Any:
    body: dict[str, Any] = {"queries": ["budget"], "collection_names": ["kb-a"], "k": 20}
    if document_filter is not None:
        body["filter"] = document_filter
    body.update(overrides)
    return api.post("/search", json=body, headers=AUTH)


def found(response: Any) -> set[str]:
    assert response.status_code == 200, response.text
    return {meta["name"] for meta in response.json()["metadatas"][0]}


CASES: list[tuple[dict[str, Any] | None, set[str]]] = [
    (None, KB_A),
    ({}, KB_A),
    ({"file_ids": ["file-budget-memo.docx"]}, {"budget-memo.docx"}),
    ({"names": ["budget-notes.md"]}, {"budget-notes.md"}),
    ({"names": ["Budget-Notes.md"]}, set()),  # exact names
    ({"formats": ["PDF"]}, {"budget-2024.pdf"}),
    ({"languages": ["da"]}, {"budget-notes.md"}),
    ({"tags": ["draft"]}, {"budget-notes.md"}),
    ({"tags": ["finance"]}, {"budget-2024.pdf", "budget-notes.md"}),
    ({"category": "reports"}, {"budget-2024.pdf", "budget-memo.docx"}),
    ({"ingested_after": "2024-08-01T02:00:00+02:00"}, {"budget-notes.md", "budget-memo.docx"}),
    ({"ingested_before": "2024-08-01T00:00:00Z"}, {"budget-2024.pdf"}),
    ({"attributes": {"dept": "sales"}}, {"budget-2024.pdf", "budget-memo.docx"}),
    ({"attributes": {"year": {"gte": 2023}}}, {"budget-2024.pdf", "budget-notes.md"}),
    ({"attributes": {"year": [2022, 2023]}}, {"budget-notes.md", "budget-memo.docx"}),
    ({"formats": ["pdf", "docx"], "attributes": {"year": {"lt": 2024}}}, {"budget-memo.docx"}),
]


@pytest.mark.parametrize("hybrid", [True, False])
def test_each_filter_returns_only_the_matching_documents(
    app_factory: Callable[..., TestClient], filtered: ChunkStore, hybrid: bool
) -> None:
    api = app_factory(filter_settings(enable_hybrid_search=hybrid), filtered)
    for document_filter, expected in CASES:
        assert found(search(api, document_filter)) == expected, document_filter


def test_the_filter_holds_for_several_queries_and_with_a_reranker(
    app_factory: Callable[..., TestClient], filtered: ChunkStore
) -> None:
    reranker = RecordingReranker()
    api = app_factory(filter_settings(), filtered, reranker=reranker)
    response = search(api, {"category": "reports"}, queries=["budget", "sales and marketing", "memo"])
    assert found(response) == {"budget-2024.pdf", "budget-memo.docx"}
    assert reranker.calls, "the reranked path ran"


def _filters(request: Any) -> list[models.Filter]:
    """The filter of a request and of each of its prefetch legs, nested ones included (a recorded
    batch: of each of its requests)."""
    if isinstance(request, list):
        return [selector for each in request for selector in _filters(each)]
    filters = [request.filter] if request.filter is not None else []
    for leg in request.prefetch if isinstance(request.prefetch, list) else []:
        filters.extend(_filters(leg))
    return filters


@pytest.mark.parametrize("hybrid", [True, False])
def test_every_store_request_carries_the_filter_with_the_tenants_refetches_included(
    app_factory: Callable[..., TestClient], filtered: ChunkStore, hybrid: bool
) -> None:
    recording = RecordingStore(filtered)
    # Windows off: no spare candidates, so the gap is filled by a deeper fetch.
    api = app_factory(filter_settings(enable_hybrid_search=hybrid, search_window_chars=0), recording)
    response = search(
        api,
        {"formats": ["pdf"]},
        queries=["The annual budget review takes place every March."],
        collection_names=["kb-dup"],
        k=2,
    )
    # The twins collapse into one hit, so the candidates were fetched again, deeper: other.pdf fills
    # the gap, never other.md's near-twin text (the best candidate without the filter).
    names = found(response)
    assert len(response.json()["documents"][0]) == len(names) == 2
    assert "other.pdf" in names
    assert all(name.startswith("twin-") for name in names - {"other.pdf"})
    # Two retrievals: on the hybrid path each is a batch of term legs, the dense leg and one read of
    # the fused hits.
    assert len(recording.queries) == (6 if hybrid else 2)
    if hybrid:
        assert len(recording.hybrid_legs_sent()) == 4
    # A contract 3.x store: the tenant's committed points are one ``meta.live_in`` condition.
    tenant = models.FieldCondition(key="meta.live_in", match=models.MatchAny(any=["kb-dup"]))
    pdf = models.FieldCondition(key="meta.format", match=models.MatchAny(any=["pdf"]))
    for request in recording.queries:
        for selector in _filters(request):
            # The read of the fused hits nests the tenant-and-filter selector under its id list.
            scoped = next((c for c in selector.must or [] if isinstance(c, models.Filter)), selector)
            assert isinstance(scoped.must, list)
            assert tenant in scoped.must
            assert pdf in scoped.must


@pytest.mark.parametrize("hybrid", [True, False])
def test_a_filter_never_widens_the_tenants(
    app_factory: Callable[..., TestClient], filtered: ChunkStore, hybrid: bool
) -> None:
    api = app_factory(filter_settings(enable_hybrid_search=hybrid), filtered)
    secret = {"file_ids": ["file-budget-secret.pdf"]}
    assert found(search(api, secret)) == set()
    assert found(search(api, {"names": ["budget-secret.pdf"]})) == set()
    assert found(search(api, {"formats": ["pdf"]}, queries=["secret budget BANANA"])) == {"budget-2024.pdf"}
    # The same filter on the tenant that holds the file finds it.
    assert found(search(api, secret, collection_names=["kb-b"])) == {"budget-secret.pdf"}


@pytest.mark.parametrize(
    ("document_filter", "needle"),
    [
        ({"owner": "me"}, "filter.owner: Extra inputs are not permitted"),
        ({"attributes": {"year": {"above": 2020}}}, "filter.attributes.year"),
        ({"ingested_after": "2024-01-01T00:00:00"}, "filter.ingested_after: Input should have timezone info"),
        (
            {"attributes": {"owner": "me"}},
            "filter.attributes.owner is not an indexed attribute (INDEXED_ATTRIBUTES: dept, year)",
        ),
        ({"attributes": {"year": "2024"}}, "filter.attributes.year: an integer attribute takes integers"),
        ({"attributes": {"dept": {"gte": 1}}}, "filter.attributes.dept: a range needs an integer, float or datetime"),
    ],
)
def test_a_filter_that_cannot_run_is_a_422_naming_the_key(
    app_factory: Callable[..., TestClient], filtered: ChunkStore, document_filter: dict[str, Any], needle: str
) -> None:
    api = app_factory(filter_settings(), filtered)
    response = search(api, document_filter)
    assert response.status_code == 422, response.text
    error = response.json()
    assert error["status"] is False
    assert error["code"] == "INVALID_REQUEST"
    assert error["error"].startswith("Invalid request: ")
    assert needle in error["error"]
    assert 'search_requests_total{code="INVALID_REQUEST",outcome="error"} 1.0' in api.get("/metrics", headers=AUTH).text


@pytest.mark.parametrize(
    "attributes",
    [
        '{"year": {"gte": NaN}}',  # matched every document
        '{"year": {"lt": Infinity}}',
        '{"year": {"gte": 1e400}}',
        '{"year": 1180591620717411303424}',  # 2**70: the engine failed the search (500)
        '{"year": [2024, -9223372036854775809]}',
    ],
)
def test_a_number_the_engine_cannot_compare_is_a_422_naming_the_key(
    app_factory: Callable[..., TestClient], filtered: ChunkStore, attributes: str
) -> None:
    api = app_factory(filter_settings(), filtered)
    # Raw JSON: the client's encoder refuses NaN and infinities, as a strict client would.
    body = '{"queries": ["budget"], "collection_names": ["kb-a"], "filter": {"attributes": ' + attributes + "}}"
    response = api.post("/search", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "INVALID_REQUEST"
    assert "filter.attributes.year: numbers must be finite, integers within 64 bits" in response.json()["error"]


# -- agentic mode ----------------------------------------------------------------------------------


def agentic_api(
    app_factory: Callable[..., TestClient], store: ChunkStore, script: Script, **overrides: Any
) -> TestClient:
    values: dict[str, Any] = {"enable_agentic_rag": True, "agent_timeout": 10.0, "agent_include_raw_query": False}
    settings = filter_settings(**{**values, **overrides})
    return app_factory(settings, store, query_model=script.model())


def test_the_filter_narrows_every_agent_tool_call(app_factory: Callable[..., TestClient], filtered: ChunkStore) -> None:
    script = Script(
        [
            lambda _: call("list_documents"),
            lambda _: call("retrieve", queries=["budget"]),
            # The agent's own filter is ANDed with the request's: finance AND English.
            lambda _: call("retrieve", queries=["budget"], filters={"languages": ["en"]}),
            # A document of the tenant that the request's filter excludes cannot be read.
            lambda _: call("read_document", file_id="file-budget-memo.docx"),
            lambda _: say("DONE"),
        ]
    )
    api = agentic_api(app_factory, filtered, script)
    response = search(api, {"tags": ["finance"]})
    assert response.headers["x-rag-agent-outcome"] == "answered"
    assert found(response) == {"budget-2024.pdf", "budget-notes.md"}
    listing, first, second, read = tool_returns(script.seen[-1])
    assert {item["name"] for item in listing["documents"]} == {"budget-2024.pdf", "budget-notes.md"}
    assert {item["name"] for item in first["results"]} == {"budget-2024.pdf", "budget-notes.md"}
    assert {item["name"] for item in second["results"]} == {"budget-2024.pdf"}
    assert read["found"] is False
    # Filtered out is not another tenant's file: no violation counted.
    assert "agent_tenant_violations_total 0.0" in api.get("/metrics", headers=AUTH).text


def test_the_filter_narrows_the_agents_direct_search_and_its_linear_fallback(
    app_factory: Callable[..., TestClient], filtered: ChunkStore
) -> None:
    plain = Script([lambda _: say('{"queries": ["budget"]}')])
    response = search(agentic_api(app_factory, filtered, plain), {"formats": ["md"]})
    assert response.headers["x-rag-agent-outcome"] == "plain_text"
    assert found(response) == {"budget-notes.md"}

    async def hang(_: list[ModelMessage]) -> ModelResponse:
        await anyio.sleep(30)
        return say("DONE")

    hanging = agentic_api(app_factory, filtered, Script([hang]), agent_timeout=0.3)
    response = search(hanging, {"formats": ["docx"]})
    assert response.headers["x-rag-agent-outcome"] == "fallback"
    assert found(response) == {"budget-memo.docx"}
