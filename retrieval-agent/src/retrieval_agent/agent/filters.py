"""The tools' metadata filters, as typed arguments the model fills and Qdrant conditions the store gets.

Tenant safety does not depend on the model: there is no collection argument anywhere, and every
condition built here is ANDed with ``tenant_filter(collection_names)`` of the request
(``search.scope.scoped_filter``, ``StoreSearch.document_heads``), so a filter can only narrow the
request's tenants, never widen them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field
from qdrant_client import models

from shared_contract import MetaKey, meta_path

MAX_FILTER_VALUES = 20
# ingest_seq = epoch milliseconds * 1000 + a random 0..999 (ingestion's versioning.py).
_SEQ_PER_MS = 1000


class DocumentFilters(BaseModel):
    """Optional metadata filters; every one given must hold (AND)."""

    model_config = ConfigDict(extra="forbid")

    file_names: list[str] | None = Field(
        default=None,
        max_length=MAX_FILTER_VALUES,
        description="Only documents whose file name contains one of these (case-insensitive), e.g. 'budget 2024'.",
    )
    file_ids: list[str] | None = Field(
        default=None, max_length=MAX_FILTER_VALUES, description="Only these documents (file_id from earlier results)."
    )
    languages: list[str] | None = Field(
        default=None,
        max_length=MAX_FILTER_VALUES,
        description="Only documents in these languages, as ISO 639-1 codes such as 'en', 'da', 'no'.",
    )
    ingested_after: date | None = Field(default=None, description="Only documents added on or after this date.")
    ingested_before: date | None = Field(default=None, description="Only documents added on or before this date.")

    def is_empty(self) -> bool:
        """No filter set (an empty list counts as unset)."""
        return not (self.file_names or self.file_ids or self.languages or self.ingested_after or self.ingested_before)


def seq_at(day: date) -> int:
    """The smallest ``ingest_seq`` a run starting at UTC midnight of ``day`` can take."""
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return int(midnight.timestamp() * 1000) * _SEQ_PER_MS


def ingested_on(seq: object) -> date | None:
    """The UTC date an ``ingest_seq`` was taken on (None for a missing or malformed seq)."""
    if not isinstance(seq, int) or isinstance(seq, bool) or seq <= 0:
        return None
    try:
        return datetime.fromtimestamp(seq / _SEQ_PER_MS / 1000, tz=UTC).date()
    except (OverflowError, ValueError, OSError):
        return None  # past year 9999 or the platform's time_t: malformed, not a date


def _clean(values: Sequence[str] | None) -> list[str]:
    return [value.strip() for value in values or [] if value.strip()]


def filter_conditions(
    filters: DocumentFilters | None, *, file_ids: Sequence[str] | None = None
) -> list[models.Condition]:
    """Conditions for ``filters`` (file names must already be resolved into ``file_ids``).

    ``file_ids`` replaces ``filters.file_ids`` when given: the ids the names resolved to, intersected
    with the ids the model asked for.
    """
    if filters is None:
        return []
    conditions: list[models.Condition] = []
    ids = list(file_ids) if file_ids is not None else _clean(filters.file_ids)
    if file_ids is not None or ids:
        conditions.append(models.FieldCondition(key=meta_path(MetaKey.FILE_ID), match=models.MatchAny(any=ids)))
    languages = sorted({code.casefold() for code in _clean(filters.languages)})
    if languages:
        # Extractors write ``languages``; ingestion derives ``lexical_language`` for every chunk.
        conditions.append(
            models.Filter(
                should=[
                    models.FieldCondition(key=meta_path(MetaKey.LANGUAGES), match=models.MatchAny(any=languages)),
                    models.FieldCondition(
                        key=meta_path(MetaKey.LEXICAL_LANGUAGE), match=models.MatchAny(any=languages)
                    ),
                ]
            )
        )
    if filters.ingested_after is not None or filters.ingested_before is not None:
        after = seq_at(filters.ingested_after) if filters.ingested_after is not None else None
        before = None
        # date.max has no next day (OverflowError); nothing is added after it, so no upper bound.
        if filters.ingested_before is not None and filters.ingested_before < date.max:
            before = seq_at(filters.ingested_before + timedelta(days=1))
        conditions.append(
            models.FieldCondition(key=meta_path(MetaKey.INGEST_SEQ), range=models.Range(gte=after, lt=before))
        )
    return conditions


def name_matches(meta: dict[str, object], wanted: Sequence[str]) -> bool:
    """Whether a document's ``name`` or ``source`` contains one of ``wanted`` (case-insensitive)."""
    names = [str(meta.get(key) or "").casefold() for key in (MetaKey.NAME, MetaKey.SOURCE)]
    return any(part.casefold() in name for part in wanted for name in names if name)
