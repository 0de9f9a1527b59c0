"""The rules a request must pass before anything is staged: reserved and bound collections, allowed
buckets, and the labels' attributes checked against INDEXED_ATTRIBUTES (403 and 400 otherwise)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ingestion_service.errors import (
    BucketNotAllowedError,
    ForbiddenRequestError,
    InvalidRequestError,
    ReservedCollectionError,
)
from ingestion_service.indexing.job import DocumentLabels
from ingestion_service.settings import Settings
from shared_contract import file_collection_name, user_memory_collection_name
from shared_contract.attributes import AttributeType, check_attributes
from shared_contract.error_body import ErrorBody
from shared_contract.schema import FILE_COLLECTION_PREFIX, MEMORY_COLLECTION_PREFIX, USER_MEMORY_COLLECTION_PREFIX

# The OpenAPI declaration of the rules below, for the routes that apply them.
FORBIDDEN_RESPONSE: dict[int | str, dict[str, Any]] = {
    403: {
        "model": ErrorBody,
        "description": (
            "INVALID_REQUEST: a rule refused it (a bucket not in S3_ALLOWED_BUCKETS, a `file-*` or "
            "`user-memory-*` collection not bound to the request's ids, a `memory-*` collection)."
        ),
    }
}


def check_not_memory(collection_name: str | None) -> None:
    """``memory-*`` tenants are the retrieval agent's long-term memory, which only its memory service writes:
    ingest and the documents API refuse them (403)."""
    if collection_name is not None and collection_name.startswith(MEMORY_COLLECTION_PREFIX):
        raise ReservedCollectionError(
            "collection_name 'memory-…' is reserved for long-term memory (the retrieval agent's /api/v1/memory)."
        )


def check_collection_binding(collection_name: str, *, file_id: str, user_id: str) -> None:
    """``file-*`` must be this file's collection, ``user-memory-*`` this user's, and ``memory-*`` belongs to
    the retrieval agent's long-term memory (403 otherwise)."""
    check_not_memory(collection_name)
    if collection_name.startswith(USER_MEMORY_COLLECTION_PREFIX):
        if collection_name != user_memory_collection_name(user_id):
            raise ForbiddenRequestError("collection_name 'user-memory-…' must equal 'user-memory-<user_id>'.")
    elif collection_name.startswith(FILE_COLLECTION_PREFIX) and collection_name != file_collection_name(file_id):
        raise ForbiddenRequestError("collection_name 'file-…' must equal 'file-<file_id>'.")


def check_bucket(settings: Settings, bucket: str) -> None:
    """S3_ALLOWED_BUCKETS, when set, lists the only buckets the service reads (403 otherwise)."""
    allowed = settings.allowed_buckets
    if allowed and bucket not in allowed:
        raise BucketNotAllowedError("s3_bucket is not in S3_ALLOWED_BUCKETS.")


def labels_from(
    fields: DocumentLabels, declared: Mapping[str, AttributeType], s3_metadata: Mapping[str, str] | None = None
) -> DocumentLabels:
    """The request's labels, attributes checked against INDEXED_ATTRIBUTES; S3 object metadata
    (``x-amz-meta-tags``: comma-separated, ``x-amz-meta-category``) fills what the request leaves out."""
    tags, category = fields.tags, fields.category
    if s3_metadata:
        if tags is None and s3_metadata.get("tags", "").strip():
            tags = list(dict.fromkeys(tag.strip() for tag in s3_metadata["tags"].split(",") if tag.strip()))
        if category is None and s3_metadata.get("category", "").strip():
            category = s3_metadata["category"].strip()
    attributes = fields.attributes
    if attributes is not None:
        try:
            attributes = check_attributes(attributes, declared)
        except ValueError as exc:
            raise InvalidRequestError(f"Invalid request: attributes: {exc}.") from exc
    return DocumentLabels(tags=tags, category=category, attributes=attributes)
