"""The caller's own document metadata (``meta.attributes``) and which keys are filterable.

INDEXED_ATTRIBUTES (``department:keyword,year:integer,published:datetime``) declares the keys both
services index and filter on; each gets a payload index of its type at bootstrap. Undeclared keys
are stored and returned, but a search filter on one is refused rather than run as a full scan.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Final, Literal, get_args

# No bool: the embedded engine matches True as the integer 1 (qdrant-edge 0.9.0), so it would never match.
AttributeType = Literal["keyword", "integer", "float", "datetime"]
ATTRIBUTE_TYPES: Final[tuple[str, ...]] = get_args(AttributeType)
ATTRIBUTE_KEY_PATTERN: Final = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
_KEY = re.compile(ATTRIBUTE_KEY_PATTERN)
MAX_ATTRIBUTES: Final = 32
MAX_ATTRIBUTE_VALUES: Final = 64
MAX_ATTRIBUTE_CHARS: Final = 512
# The engine's payload numbers: it refuses NaN and infinities and would store a wider integer as a float.
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

# How much of a submitted key an error message repeats (a key may be megabytes long).
MAX_SHOWN_KEY_CHARS: Final = 64

AttributeScalar = str | int | float | bool
AttributeValue = AttributeScalar | list[AttributeScalar]


def shown_key(key: str) -> str:
    """``key`` quoted for an error message, cut to MAX_SHOWN_KEY_CHARS (control characters escaped)."""
    if len(key) <= MAX_SHOWN_KEY_CHARS:
        return repr(key)
    return f"{key[:MAX_SHOWN_KEY_CHARS]!r}… ({len(key)} characters)"


def parse_indexed_attributes(spec: str) -> dict[str, AttributeType]:
    """``"a:keyword,b:integer"`` -> ``{"a": "keyword", "b": "integer"}`` (ValueError names the bad part)."""
    declared: dict[str, AttributeType] = {}
    for part in (piece.strip() for piece in spec.split(",")):
        if not part:
            continue
        key, _, kind = part.partition(":")
        key, kind = key.strip(), (kind.strip() or "keyword").lower()
        if not _KEY.match(key):
            raise ValueError(f"attribute key {shown_key(key)} must match {ATTRIBUTE_KEY_PATTERN}")
        if kind not in ATTRIBUTE_TYPES:
            raise ValueError(f"attribute {shown_key(key)} has type {kind!r}; use one of {', '.join(ATTRIBUTE_TYPES)}")
        if key in declared:
            raise ValueError(f"attribute {shown_key(key)} is declared twice")
        declared[key] = kind  # type: ignore[assignment]  # checked against ATTRIBUTE_TYPES above
    return declared


def storable_number(value: int | float) -> bool:
    """Whether the engine keeps ``value`` as sent: a 64-bit integer or a finite float."""
    if isinstance(value, int):
        return INT64_MIN <= value <= INT64_MAX
    return math.isfinite(value)


def _check_scalar(key: str, value: object, kind: AttributeType | None) -> AttributeScalar:
    if isinstance(value, int | float) and not isinstance(value, bool) and not storable_number(value):
        raise ValueError(f"attribute {shown_key(key)} must be a finite number, an integer within 64 bits")
    if kind is None:
        if isinstance(value, bool | int | float):
            return value
        if isinstance(value, str) and len(value) <= MAX_ATTRIBUTE_CHARS:
            return value
        raise ValueError(
            f"attribute {shown_key(key)} must be a string of at most {MAX_ATTRIBUTE_CHARS} characters or a number"
        )
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif kind == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif kind == "datetime":
        if isinstance(value, str):
            try:
                datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                pass
            else:
                return value
    elif isinstance(value, str) and len(value) <= MAX_ATTRIBUTE_CHARS:
        return value
    raise ValueError(f"attribute {shown_key(key)} must be a {kind} (INDEXED_ATTRIBUTES)")


def check_attributes(values: Mapping[str, object], declared: Mapping[str, AttributeType]) -> dict[str, AttributeValue]:
    """The attributes as stored: keys checked, declared keys of the declared type (ValueError otherwise)."""
    if len(values) > MAX_ATTRIBUTES:
        raise ValueError(f"at most {MAX_ATTRIBUTES} attributes")
    checked: dict[str, AttributeValue] = {}
    for key, value in values.items():
        if not _KEY.match(key):
            raise ValueError(f"attribute key {shown_key(key)} must match {ATTRIBUTE_KEY_PATTERN}")
        kind = declared.get(key)
        if isinstance(value, list):
            if len(value) > MAX_ATTRIBUTE_VALUES:
                raise ValueError(f"attribute {shown_key(key)} has more than {MAX_ATTRIBUTE_VALUES} values")
            checked[key] = [_check_scalar(key, item, kind) for item in value]
        else:
            checked[key] = _check_scalar(key, value, kind)
    return checked
