"""Metadata filters: the exact conditions each key becomes, what is refused, and what they select on
a real embedded store (always inside the tenants, never instead of them)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from qdrant_client import models

from rag_runtime.store import (
    ChunkStore,
    bootstrap_collection,
    chunk_point,
    close_store,
    open_store,
    pending_condition,
    tenant_condition,
)
from rag_runtime.store.document_filter import filter_conditions
from shared_contract import ContractSettings, load_settings
from shared_contract.attributes import AttributeType
from shared_contract.document_filter import DocumentFilter, UnknownFilterKeyError

DECLARED: dict[str, AttributeType] = {
    "dept": "keyword",
    "year": "integer",
    "score": "float",
    "published": "datetime",
}


def any_of(key: str, values: Sequence[str | int]) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))


def conditions(**filter_json: Any) -> list[models.Condition]:
    """The conditions of a filter as a client sends it (JSON)."""
    return filter_conditions(DocumentFilter.model_validate(filter_json), DECLARED)


# -- the conditions (what a Qdrant server gets) ---------------------------------------------------


def test_no_filter_and_an_empty_filter_add_no_condition() -> None:
    assert filter_conditions(None, DECLARED) == []
    assert filter_conditions(DocumentFilter(), DECLARED) == []


def test_each_key_becomes_its_condition_on_the_indexed_meta_path() -> None:
    after = datetime(2024, 1, 1, tzinfo=UTC)
    before = datetime(2024, 7, 1, 2, tzinfo=timezone(timedelta(hours=2)))
    built = filter_conditions(
        DocumentFilter(
            file_ids=["f1", "f2"],
            names=["Report 2024.pdf"],
            formats=[" .PDF", "Md"],
            languages=["DA", "en"],
            tags=["finance"],
            category="reports",
            ingested_after=after,
            ingested_before=before,
        ),
        DECLARED,
    )
    assert built == [
        any_of("meta.file_id", ["f1", "f2"]),
        any_of("meta.name", ["Report 2024.pdf"]),
        any_of("meta.format", ["pdf", "md"]),
        # Extractors write ``languages``, ingestion ``lexical_language``: either one matches.
        models.Filter(should=[any_of("meta.languages", ["da", "en"]), any_of("meta.lexical_language", ["da", "en"])]),
        any_of("meta.tags", ["finance"]),
        any_of("meta.category", ["reports"]),
        models.FieldCondition(key="meta.indexed_at", range=models.DatetimeRange(gte=after, lt=before)),
    ]


def test_a_category_list_matches_any_of_them() -> None:
    assert conditions(category=["reports", "notes"]) == [any_of("meta.category", ["reports", "notes"])]


def test_one_ingest_bound_alone_leaves_the_other_open() -> None:
    assert conditions(ingested_before="2024-07-01T00:00:00Z") == [
        models.FieldCondition(key="meta.indexed_at", range=models.DatetimeRange(lt=datetime(2024, 7, 1, tzinfo=UTC)))
    ]


def test_declared_attributes_become_conditions_of_their_type() -> None:
    built = conditions(
        attributes={
            "dept": "sales",
            "year": [2023, 2024],
            "score": {"gte": 0.5, "lt": 1},
            "published": {"gt": "2024-01-01T00:00:00Z"},
        }
    )
    assert built == [
        any_of("meta.attributes.dept", ["sales"]),
        any_of("meta.attributes.year", [2023, 2024]),
        models.FieldCondition(key="meta.attributes.score", range=models.Range(gte=0.5, lt=1.0)),
        models.FieldCondition(
            key="meta.attributes.published", range=models.DatetimeRange(gt=datetime(2024, 1, 1, tzinfo=UTC))
        ),
    ]
    assert conditions(attributes={"year": {"gte": 2020, "lte": 2022}}) == [
        models.FieldCondition(key="meta.attributes.year", range=models.Range(gte=2020, lte=2022))
    ]


def test_an_undeclared_attribute_is_refused_naming_it_and_the_declared_ones() -> None:
    with pytest.raises(UnknownFilterKeyError) as caught:
        conditions(attributes={"year": 2024, "owner": "me"})
    assert caught.value.key == "owner"
    assert "filter.attributes.owner" in str(caught.value)
    assert "dept, published, score, year" in str(caught.value)
    with pytest.raises(UnknownFilterKeyError, match="none are declared"):
        filter_conditions(DocumentFilter.model_validate({"attributes": {"dept": "x"}}), {})


def test_a_long_undeclared_key_is_named_cut_short() -> None:
    key = "k\n" + "x" * 2_000_000
    with pytest.raises(UnknownFilterKeyError) as caught:
        conditions(attributes={key: 1})
    message = str(caught.value)
    assert len(message) < 300
    assert "filter.attributes.'k\\nxxx" in message
    assert "(2000002 characters)" in message


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"dept": 5}, r"filter\.attributes\.dept: a keyword attribute takes strings"),
        ({"dept": {"gte": 1}}, r"filter\.attributes\.dept: a range needs an integer, float or datetime"),
        ({"year": "2024"}, r"filter\.attributes\.year: an integer attribute takes integers"),
        ({"year": [2024, 2024.5]}, r"filter\.attributes\.year: an integer attribute takes integers"),
        ({"year": {"gte": "2024-01-01T00:00:00Z"}}, r"filter\.attributes\.year: integer range bounds must be numbers"),
        ({"score": 0.5}, r"filter\.attributes\.score: a float attribute takes a range"),
        ({"published": "2024-01-01T00:00:00Z"}, r"filter\.attributes\.published: a datetime attribute takes a range"),
        # A number would pass as seconds since 1970 and match nearly everything.
        ({"published": {"gte": 2024}}, r"filter\.attributes\.published: datetime range bounds must be RFC 3339"),
    ],
)
def test_a_condition_of_the_wrong_type_is_refused_naming_the_key(attributes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        conditions(attributes=attributes)


@pytest.mark.parametrize(
    "attributes",
    [
        {"score": {"gte": math.nan}},  # would match every point
        {"score": {"lt": math.inf}},
        {"year": {"gt": -math.inf}},
        {"year": 2**63},  # wider than the engine's integers: it would fail the search
        {"year": [2024, -(2**63) - 1]},
    ],
)
def test_a_number_the_engine_cannot_compare_is_refused_naming_the_key(attributes: dict[str, Any]) -> None:
    [key] = attributes
    with pytest.raises(
        ValueError, match=rf"filter\.attributes\.{key}: numbers must be finite, integers within 64 bits"
    ):
        conditions(attributes=attributes)


def test_the_64_bit_extremes_are_kept() -> None:
    assert conditions(attributes={"year": [2**63 - 1, -(2**63)]}) == [
        any_of("meta.attributes.year", [2**63 - 1, -(2**63)])
    ]


@pytest.mark.parametrize(
    "filter_json",
    [
        {"owner": "me"},  # not a filter key: refused, never ignored
        {"attributes": {"year": True}},  # would match the integer 1
        {"attributes": {"year": [2024, False]}},
        {"attributes": {"score": {"gte": True}}},
        {"attributes": {"score": {"above": 1}}},
        {"ingested_after": "2024-01-01T00:00:00"},  # no zone
        {"file_ids": ["x"] * 1001},
    ],
)
def test_the_model_refuses_what_cannot_be_a_filter(filter_json: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        DocumentFilter.model_validate(filter_json)


# -- what the conditions select on a real embedded store -------------------------------------------

DIM = 4
# (point id, meta): tenants kb-a and kb-b; kb-b holds a file with the same name as one of kb-a.
POINTS: list[tuple[str, dict[str, Any]]] = [
    (
        "report-0",
        {
            "collection_name": "kb-a",
            "file_id": "f-report",
            "name": "Report 2024.pdf",
            "format": "pdf",
            "tags": ["finance", "q1"],
            "category": "reports",
            "indexed_at": "2024-01-15T09:00:00+00:00",
            "languages": ["en"],
            "split_id": 0,
            "attributes": {"dept": "sales", "year": 2024, "score": 0.9, "published": "2024-01-10T00:00:00Z"},
        },
    ),
    (
        "notes-0",
        {
            "collection_name": "kb-a",
            "file_id": "f-notes",
            "name": "notes.md",
            "format": "md",
            "tags": ["q1"],
            "category": "notes",
            "indexed_at": "2024-06-01T00:00:00+00:00",
            "languages": ["da"],
            "split_id": 0,
            # 2024-01-01T01:30Z, written in another zone.
            "attributes": {"dept": "legal", "year": 2023, "score": 0.2, "published": "2023-12-31T23:30:00-02:00"},
        },
    ),
    (
        "memo-0",
        {
            "collection_name": "kb-a",
            "file_id": "f-memo",
            "name": "memo.docx",
            "format": "docx",
            "indexed_at": "2025-01-01T00:00:00+00:00",
            # Bokmål: stemmed as Norwegian, so ``lexical_language`` is "no".
            "languages": ["nb"],
            "split_id": 0,
            "attributes": {"dept": "sales", "year": 2022},
        },
    ),
    (
        "secret-0",
        {
            "collection_name": "kb-b",
            "file_id": "f-secret",
            "name": "Report 2024.pdf",
            "format": "pdf",
            "tags": ["finance", "q1"],
            "category": "reports",
            "indexed_at": "2024-01-15T09:00:00+00:00",
            "languages": ["en"],
            "split_id": 0,
            "attributes": {"dept": "sales", "year": 2024, "score": 0.9, "published": "2024-01-10T00:00:00Z"},
        },
    ),
]
# A run still writing a new version of f-report: readers never see it, whatever the filter.
PENDING = (
    "report-pending",
    {**POINTS[0][1], "ingest_state": "pending", "indexed_at": "2025-06-01T00:00:00+00:00"},
)


@pytest.fixture(scope="module")
async def store(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ChunkStore]:
    settings = load_settings(
        ContractSettings,
        qdrant_uri=None,
        qdrant_path=Path(tmp_path_factory.mktemp("filter-store")),
        qdrant_index="filters",
        embedding_model="contract-tests/tiny",
        embedding_dim=DIM,
        enable_sparse_embeddings=False,
        indexed_attributes="dept:keyword,year:integer,score:float,published:datetime",
    )
    opened = open_store(settings)
    await bootstrap_collection(opened, settings)
    await opened.upsert(
        [
            chunk_point(point_id, "text", meta, dense=[1.0, 0.0, 0.0, 0.0], sparse=None)
            for point_id, meta in [*POINTS, PENDING]
        ]
    )
    yield opened
    await close_store(opened)


async def selected(store: ChunkStore, tenants: Sequence[str], **filter_json: Any) -> set[str]:
    """The point ids the filter selects within the committed points of ``tenants`` (as both services AND it)."""
    selector = models.Filter(
        must=[tenant_condition(tenants), *conditions(**filter_json)], must_not=[pending_condition()]
    )
    records, _ = await store.scroll(selector, limit=100, with_payload=True)
    return {str(record.payload["id"]) for record in records}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("filter_json", "expected"),
    [
        ({}, {"report-0", "notes-0", "memo-0"}),
        ({"file_ids": ["f-report", "f-memo"]}, {"report-0", "memo-0"}),
        ({"file_ids": []}, set()),  # an empty list matches nothing (it never means "all")
        ({"names": ["notes.md"]}, {"notes-0"}),
        ({"names": ["NOTES.md", "notes"]}, set()),  # exact file names
        ({"formats": ["PDF", ".md"]}, {"report-0", "notes-0"}),
        ({"languages": ["DA"]}, {"notes-0"}),
        ({"languages": ["no"]}, {"memo-0"}),  # only ``lexical_language`` says so
        ({"languages": ["nb"]}, {"memo-0"}),
        ({"tags": ["q1"]}, {"report-0", "notes-0"}),
        ({"tags": ["finance", "none"]}, {"report-0"}),
        ({"category": "notes"}, {"notes-0"}),
        ({"category": ["reports", "notes"]}, {"report-0", "notes-0"}),
        # At or after (inclusive), before (exclusive), in any zone.
        ({"ingested_after": "2024-06-01T02:00:00+02:00"}, {"notes-0", "memo-0"}),
        ({"ingested_before": "2024-06-01T00:00:00Z"}, {"report-0"}),
        (
            {"ingested_after": "2024-01-15T09:00:00Z", "ingested_before": "2025-01-01T00:00:00Z"},
            {"report-0", "notes-0"},
        ),
        ({"attributes": {"dept": "sales"}}, {"report-0", "memo-0"}),
        ({"attributes": {"year": [2023, 2022]}}, {"notes-0", "memo-0"}),
        ({"attributes": {"year": {"gte": 2023}}}, {"report-0", "notes-0"}),
        ({"attributes": {"score": {"gt": 0.5}}}, {"report-0"}),
        ({"attributes": {"published": {"gte": "2024-01-01T00:00:00Z"}}}, {"report-0", "notes-0"}),
        ({"attributes": {"published": {"lt": "2024-01-05T00:00:00+01:00"}}}, {"notes-0"}),
        # Every key given must hold.
        ({"formats": ["pdf", "docx"], "attributes": {"dept": "sales", "year": {"lt": 2024}}}, {"memo-0"}),
        ({"formats": ["md"], "attributes": {"dept": "sales"}}, set()),
    ],
)
async def test_each_filter_selects_exactly_the_matching_points(
    store: ChunkStore, filter_json: dict[str, Any], expected: set[str]
) -> None:
    assert await selected(store, ["kb-a"], **filter_json) == expected


@pytest.mark.anyio
async def test_a_filter_never_reaches_outside_the_tenants(store: ChunkStore) -> None:
    # Another tenant's file id, or a name both tenants hold: only the requested tenant's points.
    assert await selected(store, ["kb-a"], file_ids=["f-secret"]) == set()
    assert await selected(store, ["kb-a"], names=["Report 2024.pdf"]) == {"report-0"}
    assert await selected(store, ["kb-b"], names=["Report 2024.pdf"]) == {"secret-0"}
    assert await selected(store, ["kb-a", "kb-b"], file_ids=["f-secret"]) == {"secret-0"}
