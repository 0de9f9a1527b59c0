"""The one rule for tenant (collection) names, used wherever a name enters either service.

Open WebUI's names are ``file-<uuid>``, ``user-memory-<id>``, bare uuids and hex hashes, so
ASCII letters, digits, ``_`` and ``-`` cover them. A name is refused, never trimmed or
normalised: ingestion accepting a name search rejects would store data nobody can find.
"""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import AfterValidator, StringConstraints, WithJsonSchema

COLLECTION_NAME_MAX_CHARS: Final = 128
COLLECTION_NAME_PATTERN: Final = rf"^[A-Za-z0-9_-]{{1,{COLLECTION_NAME_MAX_CHARS}}}$"
COLLECTION_NAME_RULE: Final = (
    f"must be 1-{COLLECTION_NAME_MAX_CHARS} characters, each an ASCII letter, digit, '_' or '-'"
)
# fullmatch: Python's ``$`` also matches before a trailing newline.
_COLLECTION_NAME: Final = re.compile(rf"[A-Za-z0-9_-]{{1,{COLLECTION_NAME_MAX_CHARS}}}")


def is_collection_name(value: str) -> bool:
    """Whether ``value`` follows the rule."""
    return _COLLECTION_NAME.fullmatch(value) is not None


def check_collection_name(value: str, *, field: str = "collection_name") -> str:
    """``value`` unchanged, or ValueError naming ``field`` and the rule (never the value itself)."""
    if not is_collection_name(value):
        raise ValueError(f"{field} {COLLECTION_NAME_RULE}")
    return value


def _validate(value: str) -> str:
    # pydantic puts the field in the error's location; the message carries only the rule.
    if not is_collection_name(value):
        raise ValueError(COLLECTION_NAME_RULE)
    return value


CollectionName = Annotated[
    str,
    # Explicit: a model's str_strip_whitespace must not turn "  tenantB  " into "tenantB".
    StringConstraints(strip_whitespace=False),
    AfterValidator(_validate),
    WithJsonSchema({"type": "string", "pattern": COLLECTION_NAME_PATTERN}),
]
"""A tenant name as a pydantic/FastAPI type (body fields, query parameters)."""

__all__ = (
    "COLLECTION_NAME_MAX_CHARS",
    "COLLECTION_NAME_PATTERN",
    "COLLECTION_NAME_RULE",
    "CollectionName",
    "check_collection_name",
    "is_collection_name",
)
