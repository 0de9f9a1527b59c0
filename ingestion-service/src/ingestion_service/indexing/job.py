"""One ingest, ready to run: the file, its tenant and labels, its run version, and what a run did."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from haystack import Document

from ingestion_service.documents import SourceFile
from ingestion_service.indexing.versioning import RunVersion
from shared_contract import PENDING_STATE, MetaKey


@dataclass(frozen=True)
class DocumentLabels:
    """The caller's labels for a document; None means "keep what the stored version has"."""

    tags: list[str] | None = None
    category: str | None = None
    attributes: dict[str, Any] | None = None

    def filled_from(self, stored: dict[str, Any] | None) -> DocumentLabels:
        """Labels not given in the request carry over from the stored version (a PATCH survives a re-upload)."""
        if stored is None:
            return self
        tags = stored.get(MetaKey.TAGS)
        category = stored.get(MetaKey.CATEGORY)
        attributes = stored.get(MetaKey.ATTRIBUTES)
        return DocumentLabels(
            tags=self.tags if self.tags is not None else (list(tags) if isinstance(tags, list) else None),
            category=self.category if self.category is not None else (category if isinstance(category, str) else None),
            attributes=self.attributes
            if self.attributes is not None
            else (dict(attributes) if isinstance(attributes, dict) else None),
        )


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
        }
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
