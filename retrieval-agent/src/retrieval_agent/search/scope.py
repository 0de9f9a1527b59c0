"""Which points a search may see: the requested tenants' committed points, narrowed (never widened) by
the request's document filter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from qdrant_client import models

from rag_runtime.store import committed_filter, live_condition, pending_condition, tenant_condition
from rag_runtime.store.document_filter import filter_conditions
from retrieval_agent.errors import InvalidFilterError
from shared_contract.attributes import AttributeType
from shared_contract.document_filter import DocumentFilter


def request_conditions(
    document_filter: DocumentFilter | None, declared: Mapping[str, AttributeType]
) -> list[models.Condition]:
    """The store conditions of a request's ``filter``; InvalidFilterError names a key that cannot run.

    ``declared``: INDEXED_ATTRIBUTES. The conditions only narrow (:func:`scoped_filter` ANDs them
    with the tenant filter).
    """
    try:
        return filter_conditions(document_filter, declared)
    except ValueError as exc:  # UnknownFilterKeyError too: both name ``filter.attributes.<key>``
        raise InvalidFilterError(f"Invalid request: {exc}") from exc


def scoped_filter(
    collection_names: Sequence[str], conditions: Sequence[models.Condition] = (), *, live_key: bool = False
) -> models.Filter:
    """The tenants' committed points, narrowed by ``conditions`` (ANDed): extra conditions can only
    take points away. ``live_key``: the store is a contract 3.x one (``has_live_key``), where one
    ``meta.live_in`` condition selects those points; the tenant and "not pending" conditions
    select the same ones anywhere."""
    if not conditions:
        return committed_filter(collection_names, live_key=live_key)
    if live_key:
        return models.Filter(must=[live_condition(collection_names), *conditions])
    return models.Filter(must=[tenant_condition(collection_names), *conditions], must_not=[pending_condition()])
