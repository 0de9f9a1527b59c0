"""Metadata filters over documents, one model for both services (``/search``'s ``filter``, the documents list).

Every key maps onto a payload index the contract bootstrap creates (``store.layout``), so a filter
never becomes a full scan: an unknown key is refused by the model (``extra="forbid"``), an
attribute not declared in INDEXED_ATTRIBUTES by :func:`filter_conditions`. The conditions only
narrow: callers AND them with the tenant filter, which they never replace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, field_validator
from qdrant_client import models

from shared_contract.attributes import ATTRIBUTE_KEY_PATTERN, AttributeType, shown_key, storable_number
from shared_contract.schema import MetaKey, meta_path

MAX_FILTER_VALUES = 1000
_KEY = re.compile(ATTRIBUTE_KEY_PATTERN)


class UnknownFilterKeyError(ValueError):
    """A filter names an attribute that is not declared indexable (the message names it)."""

    def __init__(self, key: str, declared: Sequence[str]) -> None:
        known = ", ".join(sorted(declared)) or "none are declared"
        super().__init__(
            f"filter.attributes.{key if _KEY.match(key) else shown_key(key)} is not an indexed attribute "
            f"(INDEXED_ATTRIBUTES: {known}); "
            "filtering on it would scan every chunk"
        )
        self.key = key


class AttributeRange(BaseModel):
    """A range over an integer, float or datetime attribute."""

    model_config = ConfigDict(extra="forbid")

    # Strict numbers: a JSON ``true`` would otherwise pass as 1.
    gte: StrictFloat | datetime | None = None
    gt: StrictFloat | datetime | None = None
    lte: StrictFloat | datetime | None = None
    lt: StrictFloat | datetime | None = None


# Strict scalars: lax validation turns a JSON ``true`` into the integer 1, which then matches year 1.
AttributeScalarCondition = StrictStr | StrictInt | StrictFloat
AttributeCondition = AttributeScalarCondition | list[AttributeScalarCondition] | AttributeRange


class DocumentFilter(BaseModel):
    """Every filter given must hold (AND); inside one list, any value matches (OR)."""

    model_config = ConfigDict(extra="forbid")

    file_ids: list[str] | None = Field(default=None, max_length=MAX_FILTER_VALUES, description="Only these files.")
    names: list[str] | None = Field(
        default=None, max_length=MAX_FILTER_VALUES, description="Only files with one of these exact file names."
    )
    formats: list[str] | None = Field(
        default=None, max_length=64, description="Only these source formats, e.g. pdf, docx, md (case-insensitive)."
    )
    languages: list[str] | None = Field(
        default=None, max_length=64, description="Only chunks in these languages (ISO 639-1 codes, e.g. da, en)."
    )
    tags: list[str] | None = Field(
        default=None, max_length=MAX_FILTER_VALUES, description="Documents with any of these tags."
    )
    category: str | list[str] | None = Field(default=None, description="Documents in this category (or any of these).")
    ingested_after: AwareDatetime | None = Field(
        default=None, description="Ingested at or after (RFC 3339, with zone)."
    )
    ingested_before: AwareDatetime | None = Field(default=None, description="Ingested before (RFC 3339, with zone).")
    attributes: dict[str, AttributeCondition] | None = Field(
        default=None,
        description="Indexed attributes (INDEXED_ATTRIBUTES): a value, a list of values (any), or a range {gte, gt, lte, lt}.",
    )

    @field_validator("formats", "languages")
    @classmethod
    def _lower(cls, values: list[str] | None) -> list[str] | None:
        return None if values is None else [value.strip().lower().lstrip(".") for value in values]


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
    for key, condition in (f.attributes or {}).items():
        kind = declared.get(key)
        if kind is None:
            raise UnknownFilterKeyError(key, list(declared))
        conditions.append(_attribute_condition(key, condition, kind))
    return conditions
