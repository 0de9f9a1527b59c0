"""Qdrant conditions for a :class:`~shared_contract.document_filter.DocumentFilter`.

The conditions only narrow: callers AND them with the tenant filter, which they never replace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from qdrant_client import models

from shared_contract.attributes import AttributeType, storable_number
from shared_contract.document_filter import AttributeCondition, AttributeRange, DocumentFilter, UnknownFilterKeyError
from shared_contract.schema import MetaKey, meta_path


def _any(key: str, values: Sequence[str | int | float]) -> models.FieldCondition:
    return models.FieldCondition(key=meta_path(key), match=models.MatchAny(any=list(values)))


def _datetime_range(key: str, *, gte: datetime | None = None, lt: datetime | None = None) -> models.FieldCondition:
    return models.FieldCondition(key=meta_path(key), range=models.DatetimeRange(gte=gte, lt=lt))


def _check_numbers(key: str, values: Iterable[object]) -> None:
    # NaN would match every point, and an integer wider than 64 bits fails in the engine.
    for value in values:
        if isinstance(value, int | float) and not isinstance(value, bool) and not storable_number(value):
            raise ValueError(f"filter.attributes.{key}: numbers must be finite, integers within 64 bits")


def _attribute_condition(key: str, condition: AttributeCondition, kind: AttributeType) -> models.Condition:
    path = meta_path(f"{MetaKey.ATTRIBUTES}.{key}")
    if isinstance(condition, AttributeRange):
        bounds = {name: value for name, value in condition.model_dump().items() if value is not None}
        _check_numbers(key, bounds.values())
        if kind == "datetime":
            # A number would pass as seconds since 1970 and match nearly everything.
            if not all(isinstance(value, datetime) for value in bounds.values()):
                raise ValueError(f"filter.attributes.{key}: datetime range bounds must be RFC 3339 date-times")
            return models.FieldCondition(key=path, range=models.DatetimeRange(**bounds))
        if kind not in ("integer", "float"):
            raise ValueError(f"filter.attributes.{key}: a range needs an integer, float or datetime attribute")
        if any(isinstance(value, datetime) for value in bounds.values()):
            raise ValueError(f"filter.attributes.{key}: {kind} range bounds must be numbers")
        return models.FieldCondition(key=path, range=models.Range(**bounds))
    values = condition if isinstance(condition, list) else [condition]
    _check_numbers(key, values)
    if kind in ("float", "datetime"):
        raise ValueError(f"filter.attributes.{key}: a {kind} attribute takes a range {{gte, gt, lte, lt}}")
    if kind == "integer" and not all(isinstance(value, int) and not isinstance(value, bool) for value in values):
        raise ValueError(f"filter.attributes.{key}: an integer attribute takes integers")
    if kind == "keyword" and not all(isinstance(value, str) for value in values):
        raise ValueError(f"filter.attributes.{key}: a keyword attribute takes strings")
    return models.FieldCondition(key=path, match=models.MatchAny(any=list(values)))


def filter_conditions(
    document_filter: DocumentFilter | None, declared: Mapping[str, AttributeType]
) -> list[models.Condition]:
    """Qdrant conditions for ``document_filter`` (ValueError/UnknownFilterKeyError for a filter that cannot run)."""
    if document_filter is None:
        return []
    f = document_filter
    conditions: list[models.Condition] = []
    if f.file_ids is not None:
        conditions.append(_any(MetaKey.FILE_ID, f.file_ids))
    if f.names is not None:
        conditions.append(_any(MetaKey.NAME, f.names))
    if f.formats is not None:
        conditions.append(_any(MetaKey.FORMAT, f.formats))
    if f.languages is not None:
        # Extractors write ``languages``; ingestion derives ``lexical_language`` for every chunk.
        conditions.append(
            models.Filter(should=[_any(MetaKey.LANGUAGES, f.languages), _any(MetaKey.LEXICAL_LANGUAGE, f.languages)])
        )
    if f.tags is not None:
        conditions.append(_any(MetaKey.TAGS, f.tags))
    if f.category is not None:
        conditions.append(_any(MetaKey.CATEGORY, [f.category] if isinstance(f.category, str) else f.category))
    if f.ingested_after is not None or f.ingested_before is not None:
        conditions.append(_datetime_range(MetaKey.INDEXED_AT, gte=f.ingested_after, lt=f.ingested_before))
    if f.paths is not None:
        conditions.append(_any(MetaKey.PATH, f.paths))
    if f.path_prefix is not None:
        # Normalised to a list of folders by the model; each document lists its folders.
        folders = [f.path_prefix] if isinstance(f.path_prefix, str) else f.path_prefix
        conditions.append(_any(MetaKey.FOLDERS, folders))
    for key, condition in (f.attributes or {}).items():
        kind = declared.get(key)
        if kind is None:
            raise UnknownFilterKeyError(key, list(declared))
        conditions.append(_attribute_condition(key, condition, kind))
    return conditions
