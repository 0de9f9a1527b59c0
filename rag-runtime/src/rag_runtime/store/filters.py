"""Filters both services build the same way: tenants, files, and "committed versions only"."""

from __future__ import annotations

from collections.abc import Sequence

from qdrant_client import models

from shared_contract.schema import PENDING_STATE, MetaKey, meta_path


def match(key: str, value: str | int) -> models.FieldCondition:
    """``meta.<key> == value``."""
    return models.FieldCondition(key=meta_path(key), match=models.MatchValue(value=value))


def pending_condition() -> models.FieldCondition:
    """Points a run is still writing (excluded from everything readers see)."""
    return match(MetaKey.INGEST_STATE, PENDING_STATE)


def tenant_condition(collection_names: Sequence[str]) -> models.FieldCondition:
    """``meta.collection_name`` is one of ``collection_names``."""
    if not collection_names:
        raise ValueError("at least one collection name is required")
    return models.FieldCondition(
        key=meta_path(MetaKey.COLLECTION_NAME), match=models.MatchAny(any=list(collection_names))
    )


def tenant_filter(collection_names: Sequence[str]) -> models.Filter:
    """Committed points of the given tenants: what search may return."""
    return models.Filter(must=[tenant_condition(collection_names)], must_not=[pending_condition()])


def live_condition(collection_names: Sequence[str]) -> models.FieldCondition:
    """``meta.live_in`` is one of ``collection_names``: committed points of those tenants, in a
    store whose every writer sets the key (contract 3.x: ``manifest.has_live_key``)."""
    if not collection_names:
        raise ValueError("at least one collection name is required")
    return models.FieldCondition(key=meta_path(MetaKey.LIVE_IN), match=models.MatchAny(any=list(collection_names)))


def committed_filter(collection_names: Sequence[str], *, live_key: bool) -> models.Filter:
    """:func:`tenant_filter`'s points; with ``live_key`` as one condition, which the engine serves
    ~2x faster under a per-tenant IDF (docs/benchmarks.md)."""
    if live_key:
        return models.Filter(must=[live_condition(collection_names)])
    return tenant_filter(collection_names)


def file_filter(
    file_id: str,
    collection_name: str | None = None,
    *,
    must: Sequence[models.Condition] = (),
    must_not: Sequence[models.Condition] = (),
) -> models.Filter:
    """Points of one file (in one tenant, or in all), with extra conditions."""
    conditions: list[models.Condition] = [match(MetaKey.FILE_ID, file_id)]
    if collection_name is not None:
        conditions.append(match(MetaKey.COLLECTION_NAME, collection_name))
    conditions.extend(must)
    return models.Filter(must=conditions, must_not=list(must_not) or None)


def committed_file_filter(file_id: str, collection_name: str | None = None) -> models.Filter:
    """Committed points of one file: what a reader of the file sees."""
    return file_filter(file_id, collection_name, must_not=[pending_condition()])
