"""How a chunk becomes a stored point: written once, so every writer (ingestion, migration, test
fixtures) produces the payload search expects."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from rag_runtime.embedding.types import SparseVectorData
from rag_runtime.lexical import chunk_lexical_language, lexical_field
from rag_runtime.store.port import ChunkPoint
from shared_contract.schema import PAYLOAD_CONTENT, PAYLOAD_META, MetaKey

PAYLOAD_ID = "id"


# The characters uuid.UUID strips from a UUID's text forms: without them, only 32 hex digits parse.
_UUID_PUNCTUATION = frozenset("-{}:")
_URL_NAMESPACE = uuid.NAMESPACE_URL.bytes


def point_id_for(chunk_id: str) -> str:
    """A UUID for a chunk id: the id itself when it is one, else a stable UUIDv5 of it."""
    if len(chunk_id) == 32 or not _UUID_PUNCTUATION.isdisjoint(chunk_id):
        try:
            return str(uuid.UUID(chunk_id))
        except ValueError:
            pass
    return _uuid5(chunk_id)


def _uuid5(name: str) -> str:
    """``str(uuid.uuid5(uuid.NAMESPACE_URL, name))`` without the UUID objects: a search derives
    dozens of neighbour ids per request (a third of the time)."""
    digest = bytearray(hashlib.sha1(_URL_NAMESPACE + name.encode()).digest()[:16])  # noqa: S324 - UUIDv5 is SHA-1
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    text = digest.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def chunk_payload(
    chunk_id: str, content: str, meta: Mapping[str, Any], *, lexical_text: str | None = None
) -> dict[str, Any]:
    """``{"id", "content", "meta", "lexical_<code>"}``: Haystack's document shape plus the text BM25
    scores in the lexical field of its language (``meta.lexical_language`` says which):
    ``lexical_text`` (the chunk's window, see ``lexical_windows``) or else the chunk itself."""
    language = chunk_lexical_language(meta)
    return {
        PAYLOAD_ID: chunk_id,
        PAYLOAD_CONTENT: content,
        PAYLOAD_META: {**meta, MetaKey.LEXICAL_LANGUAGE: language},
        lexical_field(language): content if lexical_text is None else lexical_text,
    }


def chunk_point(
    chunk_id: str,
    content: str,
    meta: Mapping[str, Any],
    *,
    dense: Sequence[float],
    sparse: SparseVectorData | None,
    lexical_text: str | None = None,
    multilingual: Sequence[float] | None = None,
) -> ChunkPoint:
    """One chunk as a point of the shared collection."""
    payload = chunk_payload(chunk_id, content, meta, lexical_text=lexical_text)
    return ChunkPoint(
        point_id=point_id_for(chunk_id), dense=dense, sparse=sparse, payload=payload, multilingual=multilingual
    )
