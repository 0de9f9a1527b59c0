"""Metadata filters over documents, one model for both services (``/search``'s ``filter``, the documents list).

Every key maps onto a payload index the store bootstrap creates (``rag_runtime.store.layout``), so
a filter never becomes a full scan: an unknown key is refused by the model (``extra="forbid"``), an
attribute not declared in INDEXED_ATTRIBUTES by ``rag_runtime.store.document_filter``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, field_validator

from shared_contract.attributes import ATTRIBUTE_KEY_PATTERN, shown_key
from shared_contract.paths import relative_path

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
    paths: list[str] | None = Field(
        default=None,
        max_length=MAX_FILTER_VALUES,
        description="Only the files at these paths, relative to the synced root (notes/2024/plan.md).",
    )
    path_prefix: str | list[str] | None = Field(
        default=None,
        description="Documents under this folder (or any of these), relative to the synced root: whole "
        "path segments, so notes/2024 matches notes/2024/a.md and notes/2024/q1/b.md, never notes/2024-old/.",
    )

    @field_validator("formats", "languages")
    @classmethod
    def _lower(cls, values: list[str] | None) -> list[str] | None:
        return None if values is None else [value.strip().lower().lstrip(".") for value in values]

    @field_validator("paths")
    @classmethod
    def _paths(cls, values: list[str] | None) -> list[str] | None:
        return None if values is None else [relative_path(value) for value in values]

    @field_validator("path_prefix")
    @classmethod
    def _folders(cls, value: str | list[str] | None) -> list[str] | None:
        if value is None:
            return None
        folders = [value] if isinstance(value, str) else value
        if not 1 <= len(folders) <= MAX_FILTER_VALUES:
            raise ValueError(f"must name 1 to {MAX_FILTER_VALUES} folders")
        return [relative_path(folder) for folder in folders]
