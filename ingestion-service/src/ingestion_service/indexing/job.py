"""One ingest, ready to run: the file, its tenant and labels, its run version, and what a run did."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from haystack import Document

from ingestion_service.documents import SourceFile
from ingestion_service.documents.front_matter import FRONT_MATTER_KEY
from ingestion_service.indexing.versioning import RunVersion
from shared_contract import PENDING_STATE, MetaKey
from shared_contract.attributes import MAX_ATTRIBUTES
from shared_contract.paths import path_folders


@dataclass(frozen=True)
class DocumentLabels:
    """The caller's labels for a document; None means "keep what the stored version has"."""

    tags: list[str] | None = None
    category: str | None = None
    attributes: dict[str, Any] | None = None

    def filled_from(self, stored: Mapping[str, Any] | None) -> DocumentLabels:
        """Labels not given in the request carry over from the stored version (a PATCH survives a re-upload)."""
        if stored is None:
            return self
        return self.over(DocumentLabels.read_from(stored))

    def over(self, fallback: DocumentLabels) -> DocumentLabels:
        """These labels, each one not given taken from ``fallback``."""
        return DocumentLabels(
            tags=self.tags if self.tags is not None else fallback.tags,
            category=self.category if self.category is not None else fallback.category,
            attributes=self.attributes if self.attributes is not None else fallback.attributes,
        )

    @staticmethod
    def read_from(meta: Mapping[str, Any]) -> DocumentLabels:
        """The labels in ``meta`` (a payload's, or the front matter's FRONT_MATTER_KEY), None where absent."""
        tags = meta.get(MetaKey.TAGS)
        category = meta.get(MetaKey.CATEGORY)
        attributes = meta.get(MetaKey.ATTRIBUTES)
        return DocumentLabels(
            tags=list(tags) if isinstance(tags, list) else None,
            category=category if isinstance(category, str) else None,
            attributes=dict(attributes) if isinstance(attributes, dict) else None,
        )


def front_matter_labels(meta: Mapping[str, Any] | None) -> DocumentLabels:
    """The labels a chunk's Markdown front matter set (``documents.front_matter``); none without one."""
    labels = None if meta is None else meta.get(FRONT_MATTER_KEY)
    return DocumentLabels.read_from(labels) if isinstance(labels, dict) else DocumentLabels()


def _with_front_matter(requested: DocumentLabels, front_matter: DocumentLabels) -> DocumentLabels:
    """The request's labels over the front matter's; attributes key by key (``rag sync`` sends its
    own marks as attributes, which must not drop a note's), at most MAX_ATTRIBUTES."""
    labels = requested.over(front_matter)
    if requested.attributes is None or front_matter.attributes is None:
        return labels
    attributes = dict(requested.attributes)
    for key, value in front_matter.attributes.items():
        if key not in attributes and len(attributes) < MAX_ATTRIBUTES:
            attributes[key] = value
    return replace(labels, attributes=attributes)


def publish_labels(
    requested: DocumentLabels, front_matter: DocumentLabels, stored: Mapping[str, Any] | None
) -> DocumentLabels:
    """The labels a version is published with: each the request's, else its front matter's (the
    request's attributes merged over the front matter's), else the stored version's, unless that
    one came from the stored version's own front matter (a tag deleted from a note's front matter
    is gone, a tag set by a PATCH stays)."""
    if stored is None:
        return _with_front_matter(requested, front_matter)
    kept = DocumentLabels.read_from(stored)
    previous = front_matter_labels(stored)
    carried = DocumentLabels(
        tags=None if kept.tags == previous.tags else kept.tags,
        category=None if kept.category == previous.category else kept.category,
        attributes=None if kept.attributes == previous.attributes else kept.attributes,
    )
    return _with_front_matter(requested, front_matter).over(carried)


@dataclass(frozen=True)
class SourceIdentity:
    """What identifies the bytes and where they came from."""

    sha256: str
    size: int
    format: str
    s3_bucket: str | None = None
    s3_key: str | None = None
    s3_etag: str | None = None


@dataclass(frozen=True)
class IngestJob:
    """One ingest request, ready to run."""

    source: SourceFile
    file_id: str
    collection_name: str
    collection_type: str
    user_id: str
    overwrite: bool
    run: RunVersion
    engine: str | None = None
    identity: SourceIdentity | None = None
    labels: DocumentLabels = field(default_factory=DocumentLabels)
    # INGEST_FINGERPRINT of the settings this run uses; with ``identity`` it enables the unchanged fast path.
    fingerprint: str | None = None
    force: bool = False
    # What listings and citations show (name, source) when it is not the file's name: a fetched URL.
    name: str | None = None
    # Documents already extracted from ``source`` (the document loader's): the pipeline starts after extraction.
    extracted: tuple[Document, ...] | None = None
    # False when ``source`` is not the file's bytes (a reindex from stored text): nothing to keep.
    source_is_original: bool = True
    # The file's path relative to the folder it came from (validated by ``shared_contract.paths``).
    path: str | None = None
    # A source's document (``ingestion_service.sources``): the URI it was read from, and when (ISO 8601).
    source_uri: str | None = None
    fetched_at: str | None = None

    def document_meta(self) -> dict[str, Any]:
        """The document-level keys (every chunk of the file carries the same values)."""
        meta: dict[str, Any] = {
            MetaKey.COLLECTION_TYPE: self.collection_type,
            MetaKey.USER_ID: self.user_id,
            MetaKey.NAME: self.source.filename if self.name is None else self.name,
            MetaKey.SOURCE: self.source.filename if self.name is None else self.name,
            MetaKey.TAGS: self.labels.tags,
            MetaKey.CATEGORY: self.labels.category,
            MetaKey.ATTRIBUTES: self.labels.attributes,
            MetaKey.PATH: self.path,
            MetaKey.FOLDERS: None if self.path is None else path_folders(self.path),
        }
        if self.source_uri is not None:
            meta |= {MetaKey.SOURCE_URI: self.source_uri, MetaKey.FETCHED_AT: self.fetched_at}
        if self.identity is not None:
            meta |= {
                MetaKey.SOURCE_HASH: self.identity.sha256,
                MetaKey.SOURCE_BYTES: self.identity.size,
                MetaKey.FORMAT: self.identity.format,
                MetaKey.S3_BUCKET: self.identity.s3_bucket,
                MetaKey.S3_KEY: self.identity.s3_key,
                MetaKey.S3_ETAG: self.identity.s3_etag,
            }
        if self.fingerprint is not None:
            meta[MetaKey.INGEST_FINGERPRINT] = self.fingerprint
        return meta

    def meta(self) -> dict[str, Any]:
        """Request metadata every chunk carries (it wins over extractor metadata)."""
        return {
            MetaKey.FILE_ID: self.file_id,
            MetaKey.COLLECTION_NAME: self.collection_name,
            **self.document_meta(),
            MetaKey.INGEST_VERSION: self.run.version,
            MetaKey.INGEST_SEQ: self.run.seq,
            MetaKey.INGEST_STATE: PENDING_STATE,
        }

    def stored_as(self, stored: dict[str, Any]) -> bool:
        """Whether ``stored`` (a committed head's meta) holds these bytes under the same fingerprint."""
        return (
            self.identity is not None
            and self.fingerprint is not None
            and stored.get(MetaKey.SOURCE_HASH) == self.identity.sha256
            and stored.get(MetaKey.INGEST_FINGERPRINT) == self.fingerprint
        )


@dataclass(frozen=True)
class IngestOutcome:
    """What a finished run did."""

    chunks_count: int
    engine: str
    superseded: bool = False
    kept_existing: bool = False
    # The same bytes were stored under the same settings: nothing was written but changed metadata.
    unchanged: bool = False
    # The points were copied from the file's identical copy in another tenant (no extraction, no embedding).
    reused_vectors: bool = False
    # The version readers now see when it is not this run's (unchanged, kept_existing).
    live_version: str | None = None
    # kept_existing: the sha256 of the stored version's source, which the caller's file did not replace.
    stored_hash: str | None = None
