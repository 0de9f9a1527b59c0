"""Names both services must spell the same way: vectors, payload keys, tenant naming rules."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Final, Literal

DEFAULT_COLLECTION: Final = "ingestion_files"

DENSE_VECTOR: Final = "text-dense"
SPARSE_VECTOR: Final = "text-sparse"
# A multilingual model's vector, written only for chunks outside the dense model's languages
# (MULTILINGUAL_EMBEDDING_PROVIDER; absent from collections built without it).
MULTILINGUAL_VECTOR: Final = "text-dense-multilingual"

# Top-level payload keys, as qdrant-haystack writes a Haystack Document.
PAYLOAD_CONTENT: Final = "content"
PAYLOAD_META: Final = "meta"


class MetaKey:
    """Keys inside ``payload["meta"]``."""

    FILE_ID: Final = "file_id"
    COLLECTION_NAME: Final = "collection_name"
    COLLECTION_TYPE: Final = "collection_type"
    USER_ID: Final = "user_id"
    NAME: Final = "name"
    SOURCE: Final = "source"
    SPLIT_ID: Final = "split_id"
    PAGE: Final = "page"
    HEADERS: Final = "headers"
    TITLE: Final = "title"
    AUTHORS: Final = "authors"
    LANGUAGES: Final = "languages"
    # The chunk's own language (contract 3.1): a Spanish passage of an English document says "es".
    # It picks the chunk's lexical field and multilingual vector; ``languages`` stays the document's.
    LANGUAGE: Final = "language"
    EXTRACTOR: Final = "extractor"
    INGEST_VERSION: Final = "ingest_version"
    INGEST_SEQ: Final = "ingest_seq"
    CONTENT_HASH: Final = "content_hash"
    INDEXED_AT: Final = "indexed_at"
    # "pending" while a run writes its chunks, "live" once committed (absent on data older than
    # contract 2.0, which counts as live). Readers never see pending points.
    INGEST_STATE: Final = "ingest_state"
    # The tenant a committed point belongs to, set with "live" and never on a pending point
    # (contract 3.0): search filters on it alone, one condition instead of tenant + not pending.
    LIVE_IN: Final = "live_in"
    # Which lexical field (``lexical_<code>``) holds the chunk's text: the language it is stemmed in.
    LEXICAL_LANGUAGE: Final = "lexical_language"
    # Document-level keys, the same on every chunk of a file (contract 2.1).
    # sha256 of the source file's bytes: what sync and the unchanged fast path compare.
    SOURCE_HASH: Final = "source_sha256"
    SOURCE_BYTES: Final = "source_bytes"
    # Lower-case kind of the source ("pdf", "docx", "md", ...), from its content where it was sniffed.
    FORMAT: Final = "format"
    TAGS: Final = "tags"
    CATEGORY: Final = "category"
    # The caller's own keys (``attributes.<key>``); those in INDEXED_ATTRIBUTES are filterable.
    ATTRIBUTES: Final = "attributes"
    # Chunks and UTF-8 bytes of chunk text of the whole document.
    CHUNK_COUNT: Final = "chunk_count"
    TEXT_BYTES: Final = "text_bytes"
    # Where the source came from, so a reindex can read it again (absent for uploads).
    S3_BUCKET: Final = "s3_bucket"
    S3_KEY: Final = "s3_key"
    # The object's ETag when it was read: sync compares it to skip an unchanged object unread.
    S3_ETAG: Final = "s3_etag"
    # Digest of everything besides the bytes that decides the chunks and vectors (contract,
    # models, chunking, engine): same source hash + same fingerprint = same points.
    INGEST_FINGERPRINT: Final = "ingest_fingerprint"
    # The document's path relative to the folder it was synced or ingested from (contract 3.2;
    # ``shared_contract.paths``), and the folders that path lies in, each an exact keyword to filter on.
    PATH: Final = "path"
    FOLDERS: Final = "folders"
    # A source's document (the ingestion service's sources): the URI it was read from, and when
    # (ISO 8601, UTC) the bytes now indexed were read there.
    SOURCE_URI: Final = "source_uri"
    FETCHED_AT: Final = "fetched_at"
    # Where the chunk's text starts in the document's extracted text (its pages in order, joined by a
    # blank line), in characters; absent when the chunk is not a verbatim piece of that text.
    CHAR_START: Final = "char_start"
    # Where the chunk sits (contract 3.3): ``[{"page": <0-based>, "boxes": [[x0, y0, x1, y1], ...]}]``,
    # each box a line run as fractions of the page as shown (crop box, turned by /Rotate), origin
    # top-left; and how it was found: "text_layer", or "none" where the format gives no geometry.
    REGIONS: Final = "regions"
    GEOMETRY: Final = "geometry"


PENDING_STATE: Final = "pending"
LIVE_STATE: Final = "live"


def chunk_id(meta: Mapping[str, object], split_id: int) -> str:
    """A chunk's id: stable per (file, tenant, version, position), so a retried write overwrites and
    never duplicates, and a reader finds a chunk's neighbours by id (its point id is
    ``rag_runtime.store.point_id_for`` of this)."""
    key = "\x00".join(
        str(meta.get(name, "")) for name in (MetaKey.FILE_ID, MetaKey.COLLECTION_NAME, MetaKey.INGEST_VERSION)
    )
    return hashlib.sha256(f"{key}\x00{split_id}".encode()).hexdigest()


def page_number(page: object) -> int | None:
    """The page as people count it (1 for the first) from a stored ``meta.page``, which is 0-based as
    Open WebUI reads it; None when the chunk has no page."""
    return page + 1 if isinstance(page, int) and not isinstance(page, bool) and page >= 0 else None


def meta_path(key: str) -> str:
    """The payload path Qdrant filters and indexes use for a meta key (``meta.<key>``)."""
    return f"{PAYLOAD_META}.{key}"


FILE_COLLECTION_PREFIX: Final = "file-"
USER_MEMORY_COLLECTION_PREFIX: Final = "user-memory-"
# This project's long-term memory (retrieval agent, ENABLE_MEMORY): one tenant per user, written only
# by the memory service. Reserved: ingestion, /search and chat refuse it as a knowledge base.
MEMORY_COLLECTION_PREFIX: Final = "memory-"
MEMORY_TENANT_RULE: Final = (
    "names starting with 'memory-' are reserved for long-term memory: read it through /api/v1/memory/{user}/facts"
)


TenantKind = Literal["knowledge_base", "file", "user_memory", "memory"]


def tenant_kind(name: str) -> TenantKind:
    """Open WebUI's naming: ``file-<id>`` holds one uploaded file, ``user-memory-<id>`` a user's memories;
    ``memory-<user>`` is this project's long-term memory of one user."""
    if name.startswith(FILE_COLLECTION_PREFIX):
        return "file"
    if name.startswith(USER_MEMORY_COLLECTION_PREFIX):
        return "user_memory"
    if name.startswith(MEMORY_COLLECTION_PREFIX):
        return "memory"
    return "knowledge_base"


def file_collection_name(file_id: str) -> str:
    """The tenant Open WebUI uses for a single uploaded file."""
    return f"{FILE_COLLECTION_PREFIX}{file_id}"


def user_memory_collection_name(user_id: str) -> str:
    """The tenant Open WebUI uses for a user's memories."""
    return f"{USER_MEMORY_COLLECTION_PREFIX}{user_id}"


def memory_collection_name(user: str) -> str:
    """The tenant holding one user's long-term memory facts."""
    return f"{MEMORY_COLLECTION_PREFIX}{user}"
