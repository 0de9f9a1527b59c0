"""Formula queries on the embedded engine: the merged BM25 leg the retrieval agent sends."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import qdrant_edge as edge
from qdrant_client import models

from shared_contract import ContractSettings, StoreRequestError, load_settings
from shared_contract.store import (
    ChunkStore,
    bootstrap_collection,
    chunk_point,
    close_store,
    open_store,
    tenant_filter,
)
from shared_contract.store.edge_requests import to_edge_query

pytestmark = pytest.mark.anyio

TENANT = "kb-formula"
CHUNKS = [
    ("Hundene løp over broene i byen", ["nb"]),
    ("Broen over elven er lang", ["nb"]),
    ("Hunden sover på broen hele dagen", ["nb"]),
    ("Hunden løb over broen i går", ["da"]),
]


@pytest.fixture(scope="module")
async def store() -> AsyncIterator[ChunkStore]:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:")
    opened = open_store(settings)
    await bootstrap_collection(opened, settings)
    await opened.upsert(
        [
            chunk_point(
                uuid.uuid4().hex,
                text,
                {"collection_name": TENANT, "file_id": f"f{i}", "languages": languages},
                dense=[1.0] + [0.0] * 383,
                sparse=None,
            )
            for i, (text, languages) in enumerate(CHUNKS)
        ]
    )
    yield opened
    await close_store(opened)


def _merged(fields: list[str], text: str) -> models.QueryRequest:
    selector = tenant_filter([TENANT])
    idf = models.SearchParams(idf=models.IdfCorpusParams(corpus=selector))
    legs = [
        models.Prefetch(query=models.TextQuery(text=text), using=field, filter=selector, params=idf, limit=10)
        for field in fields
    ]
    names = [f"$score[{i}]" for i in range(len(legs))]
    return models.QueryRequest(
        prefetch=legs,
        query=models.FormulaQuery(formula=models.SumExpression(sum=list(names)), defaults=dict.fromkeys(names, 0.0)),
        limit=10,
        with_payload=["meta.file_id"],
    )


async def test_summed_language_legs_rank_every_chunk_by_its_own_bm25_score(store: ChunkStore) -> None:
    selector = tenant_filter([TENANT])
    idf = models.SearchParams(idf=models.IdfCorpusParams(corpus=selector))
    alone: dict[str, float] = {}
    for field in ("lexical_no", "lexical_da"):
        hits = await store.query(
            models.QueryRequest(
                query=models.TextQuery(text="hund bro"),
                using=field,
                filter=selector,
                params=idf,
                limit=10,
                with_payload=["meta.file_id"],
            )
        )
        alone.update({hit.payload["meta"]["file_id"]: hit.score for hit in hits})
    merged = await store.query(_merged(["lexical_no", "lexical_da"], "hund bro"))
    assert {hit.payload["meta"]["file_id"]: hit.score for hit in merged} == pytest.approx(alone)
    assert [hit.score for hit in merged] == sorted(alone.values(), reverse=True)
    assert {"f0", "f3"} <= set(alone)  # the Danish chunk is found through its own stemmer


def test_formula_translation_keeps_constants_variables_and_defaults() -> None:
    query = models.FormulaQuery(
        formula=models.SumExpression(sum=["$score[0]", models.MultExpression(mult=[0.5, "$score[1]"])]),
        defaults={"$score[0]": 0.0, "$score[1]": 0.0},
    )
    assert isinstance(to_edge_query(query, None), edge.Formula)


def test_formula_expressions_outside_the_subset_are_refused() -> None:
    query = models.FormulaQuery(formula=models.SqrtExpression(sqrt="$score[0]"))
    with pytest.raises(StoreRequestError, match="does not support"):
        to_edge_query(query, None)
