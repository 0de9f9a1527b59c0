"""Formula queries on the embedded engine: the merged BM25 leg the retrieval agent sends, and the
decay over a datetime payload key that boosts recently updated memory facts."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import qdrant_edge as edge
from qdrant_client import models

from rag_runtime.store import (
    ChunkStore,
    bootstrap_collection,
    chunk_point,
    close_store,
    open_store,
    tenant_filter,
)
from rag_runtime.store.edge_requests import to_edge_query
from shared_contract import ContractSettings, StoreRequestError, load_settings

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


# -- decays over a datetime payload key ---------------------------------------------------------

DECAY_TENANT = "kb-decay"
TARGET = "2026-06-01T12:00:00Z"
DAY = 86_400.0
# file id -> meta.updated_at (None: the key is absent); one day apart, the last in another notation.
UPDATED = {
    "now": TARGET,
    "day": "2026-05-31T12:00:00Z",
    "two-days": "2026-05-30T13:00:00+01:00",
    "unknown": None,
}


@pytest.fixture(scope="module")
async def dated() -> AsyncIterator[ChunkStore]:
    """Points with the same vector (score 1.0) and different ``meta.updated_at``; no datetime index."""
    settings = load_settings(ContractSettings, qdrant_uri=":memory:")
    opened = open_store(settings)
    await bootstrap_collection(opened, settings)
    points = []
    for file_id, updated_at in UPDATED.items():
        meta: dict[str, Any] = {"collection_name": DECAY_TENANT, "file_id": file_id, "languages": ["en"]}
        if updated_at is not None:
            meta["updated_at"] = updated_at
        points.append(chunk_point(uuid.uuid4().hex, file_id, meta, dense=[1.0] + [0.0] * 383, sparse=None))
    await opened.upsert(points)
    yield opened
    await close_store(opened)


def _decayed(decay: models.Expression, defaults: dict[str, Any] | None) -> models.QueryRequest:
    selector = tenant_filter([DECAY_TENANT])
    return models.QueryRequest(
        prefetch=[models.Prefetch(query=[1.0] + [0.0] * 383, using="text-dense", filter=selector, limit=10)],
        query=models.FormulaQuery(formula=models.MultExpression(mult=["$score", decay]), defaults=defaults),
        limit=10,
        with_payload=["meta.file_id"],
    )


def _params(midpoint: float | None = 0.5) -> models.DecayParamsExpression:
    return models.DecayParamsExpression(
        x=models.DatetimeKeyExpression(datetime_key="meta.updated_at"),
        target=models.DatetimeExpression(datetime=TARGET),
        scale=DAY,  # datetimes count in seconds
        midpoint=midpoint,
    )


@pytest.mark.parametrize(
    ("decay", "expected"),
    [
        # midpoint ** (distance / scale)
        (models.ExpDecayExpression(exp_decay=_params()), {"now": 1.0, "day": 0.5, "two-days": 0.25}),
        # midpoint ** ((distance / scale) ** 2)
        (models.GaussDecayExpression(gauss_decay=_params()), {"now": 1.0, "day": 0.5, "two-days": 0.0625}),
        # 1 - (1 - midpoint) * distance / scale, floored at 0
        (models.LinDecayExpression(lin_decay=_params()), {"now": 1.0, "day": 0.5, "two-days": 0.0}),
    ],
)
async def test_decays_over_a_datetime_key_score_by_age_without_a_datetime_index(
    dated: ChunkStore, decay: models.Expression, expected: dict[str, float]
) -> None:
    hits = await dated.query(_decayed(decay, {"meta.updated_at": "1970-01-01T00:00:00Z"}))
    scores = {hit.payload["meta"]["file_id"]: hit.score for hit in hits}
    assert scores == pytest.approx({**expected, "unknown": 0.0}, abs=1e-6)


async def test_a_point_without_the_datetime_key_fails_the_query_unless_it_has_a_default(dated: ChunkStore) -> None:
    with pytest.raises(StoreRequestError):
        await dated.query(_decayed(models.ExpDecayExpression(exp_decay=_params()), None))


async def test_a_decay_without_target_midpoint_or_scale_takes_the_servers_defaults(dated: ChunkStore) -> None:
    # target 0, midpoint 0.5, scale 1: x = 2 gives 0.5 ** 2.
    bare = models.ExpDecayExpression(exp_decay=models.DecayParamsExpression(x=2.0))
    hits = await dated.query(_decayed(bare, None))
    assert [hit.score for hit in hits] == pytest.approx([0.25] * len(UPDATED))
