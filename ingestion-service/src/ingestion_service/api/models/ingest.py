"""Wire models of PUT /api/v1/ingest (field names exactly as Open WebUI sends them) and its jobs."""

from __future__ import annotations

import unicodedata
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, field_validator
from pydantic_core import PydanticUseDefault

from ingestion_service.api.models.fields import (
    MAX_FILENAME_CHARS,
    MAX_LABEL_CHARS,
    MAX_S3_KEY_BYTES,
    MAX_TAGS,
    check_bucket_name,
    check_filename,
    check_tags,
)
from ingestion_service.api.validation import form_field_error, json_reason, strict_json
from ingestion_service.jobs.ingest import JobState
from ingestion_service.run_control import Stage
from shared_contract import CollectionName
from shared_contract.paths import MAX_PATH_CHARS, relative_path

# Longer URLs are not links people share; 20 of them fit the web loader's 64 KiB body.
MAX_URL_CHARS = 2048
TRUE_WORDS = frozenset({"true", "1", "yes", "y"})
FALSE_WORDS = frozenset({"false", "0", "no", "n"})


class IngestBase(BaseModel):
    """The fields every request mode carries: the document's id, tenant, owner, options and labels."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    # Refused, never trimmed, like collection_name: the documents routes address the id exactly as sent.
    file_id: str = Field(min_length=1, max_length=256)
    collection_name: CollectionName  # refused, never trimmed, if it breaks the contract rule
    collection_type: str = Field(default="file", min_length=1, max_length=64)
    user_id: str = Field(min_length=1, max_length=256)
    overwrite: StrictBool = True
    force: StrictBool = Field(
        default=False,
        description="Re-extract and re-embed even when the same bytes are stored under the same settings.",
    )
    tags: list[str] | None = Field(
        default=None,
        max_length=MAX_TAGS,
        description="Labels to filter on (/search filter.tags); replace the stored ones.",
    )
    category: str | None = Field(default=None, min_length=1, max_length=MAX_LABEL_CHARS)
    attributes: dict[str, Any] | None = Field(
        default=None,
        description="Your own metadata; keys declared in INDEXED_ATTRIBUTES are filterable and type-checked.",
    )

    @field_validator("file_id", mode="before")
    @classmethod
    def _untrimmed_file_id(cls, value: object) -> object:
        # "before": the model's str_strip_whitespace would otherwise trim it first.
        if isinstance(value, str) and value != value.strip():
            raise ValueError("must not start or end with whitespace")
        # The documents routes could never address such an id (a URL path segment holds no newline).
        if isinstance(value, str) and any(unicodedata.category(char) == "Cc" for char in value):
            raise ValueError("must not contain control characters (a newline, a tab)")
        return value

    @field_validator("tags")
    @classmethod
    def _clean_tags(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_tags(value)


class IngestFields(IngestBase):
    """The S3 and upload modes' fields: the common ones plus the file's name."""

    filename: str = Field(min_length=1, max_length=MAX_FILENAME_CHARS)
    path: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PATH_CHARS,
        description="The file's path relative to the folder it comes from (notes/2024/plan.md): shown in results, "
        "filtered on by folder (/search filter.path_prefix). Relative, no '..'; '\\' is read as '/'.",
    )

    @field_validator("filename")
    @classmethod
    def _plain_filename(cls, value: str) -> str:
        return check_filename(value)

    @field_validator("path")
    @classmethod
    def _relative_path(cls, value: str | None) -> str | None:
        return None if value is None else relative_path(value)


class IngestRequestJSON(IngestFields):
    """JSON mode: the object is read from S3/MinIO."""

    s3_bucket: str = Field(min_length=1, max_length=255)
    s3_key: str = Field(min_length=1, max_length=1024)

    @field_validator("s3_bucket")
    @classmethod
    def _valid_bucket(cls, value: str) -> str:
        return check_bucket_name(value)

    @field_validator("s3_key")
    @classmethod
    def _key_fits(cls, value: str) -> str:
        if len(value.encode()) > MAX_S3_KEY_BYTES:
            raise ValueError(f"must be at most {MAX_S3_KEY_BYTES} bytes of UTF-8")
        return value


class IngestRequestURL(IngestBase):
    """JSON mode with ``url``: the document is fetched from the web (``adapters/url_fetcher.py``).

    Its name and citation source are the URL; the file name engines see comes from the URL's path
    and the served Content-Type.
    """

    url: str = Field(
        min_length=1,
        max_length=MAX_URL_CHARS,
        description="An http(s) URL of a public host (or one in URL_FETCH_ALLOW_NETWORKS), without credentials.",
    )


class IngestForm(IngestFields):
    """Multipart mode: the same fields, each sent as text.

    Booleans are words (true/1/yes/y, false/0/no/n, any case); ``tags`` is ``a,b`` or a JSON array of
    strings; ``attributes`` a JSON object; a blank optional field is as if not sent. Refusals are
    worded per field (:func:`ingestion_service.api.validation.invalid_request` with ``form=True``).
    """

    @field_validator("file_id", "filename", "collection_name", "user_id", mode="before")
    @classmethod
    def _required(cls, value: object, info: ValidationInfo) -> object:
        # Before the fields' own checks: a blank id is missing, not "starts with whitespace".
        if isinstance(value, str) and not value.strip():
            raise form_field_error(f"Invalid request: form field {info.field_name!r} is required.")
        return value

    @field_validator("collection_type", "category", "path", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            raise PydanticUseDefault
        return value

    @field_validator("overwrite", "force", mode="before")
    @classmethod
    def _form_bool(cls, value: object, info: ValidationInfo) -> object:
        if not isinstance(value, str):
            return value
        word = value.strip().lower()
        if not word:
            raise PydanticUseDefault
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise form_field_error(f"Form field {info.field_name!r} must be a boolean (true/false/1/0/yes/no).")

    @field_validator("tags", mode="before")
    @classmethod
    def _form_tags(cls, value: object) -> object:
        """``a,b`` or a JSON array of strings (a blank field: no tags)."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if not text.startswith("["):
            return [tag for tag in text.split(",") if tag.strip()]
        parsed = _form_json("tags", text)
        if not isinstance(parsed, list) or not all(isinstance(item, str) for item in parsed):
            raise form_field_error(
                "Invalid request: form field 'tags' must be comma-separated or a JSON array of strings."
            )
        return parsed

    @field_validator("attributes", mode="before")
    @classmethod
    def _form_attributes(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        parsed = _form_json("attributes", value)
        if not isinstance(parsed, dict):
            raise form_field_error("Invalid request: form field 'attributes' must be a JSON object.")
        return parsed


def _form_json(name: str, text: str) -> object:
    try:
        return strict_json(text)
    except ValueError as exc:
        raise form_field_error(f"Invalid request: form field {name!r} is not valid JSON{json_reason(exc)}.") from exc


class ExtractionInfo(BaseModel):
    """How the document was extracted and what the run did."""

    engine: str
    ingest_version: str | None = None
    superseded: bool = False
    kept_existing: bool = False
    reused_vectors: bool = Field(
        default=False,
        description="The chunks and vectors were copied from this file's identical copy in another collection.",
    )


class IngestResponse(BaseModel):
    """200 body; Open WebUI checks only ``status``."""

    status: bool = True
    collection_name: str
    chunks_count: int
    unchanged: bool = Field(
        default=False,
        description="The same bytes were already stored under the same settings: nothing was re-embedded "
        "(metadata such as name, tags, category and attributes was updated in place).",
    )
    content_hash: str | None = Field(
        default=None,
        description="sha256 of the source file's bytes; with extraction.kept_existing, of the stored version's.",
    )
    extraction: ExtractionInfo


class IngestAccepted(BaseModel):
    """202 body of an async ingest (``Prefer: respond-async`` or ``?mode=async``): the document is staged."""

    status: bool = True
    job_id: str
    state: JobState
    file_id: str
    collection_name: str
    status_url: str = Field(description="Where to poll the job; also the Location header.")


class IngestStageView(BaseModel):
    """How far a running job's pipeline is through its current stage."""

    name: Stage = Field(
        description="converting (units: the file), then embedding, embedding_sparse, embedding_multilingual "
        "and writing (units: the document's chunks); a stage the settings leave out is skipped."
    )
    done: int
    total: int
    eta_seconds: float | None = Field(
        description="Seconds until the stage is done, at its pace so far; null before its first unit is done."
    )


class IngestJobResponse(BaseModel):
    """GET /api/v1/ingest/jobs/{job_id}: an async ingest and, once finished, what the sync ingest would have answered."""

    job_id: str
    state: JobState
    file_id: str
    collection_name: str
    created_at: datetime
    started_at: datetime | None = Field(
        description="When the pipeline run got its concurrency slot; null if it never got one "
        "(still queued, cancelled while queued, or overwrite=false with an existing version)."
    )
    finished_at: datetime | None
    stage: IngestStageView | None = Field(
        description="running: the pipeline's current stage and how far through it; otherwise null."
    )
    result: dict[str, Any] | None = Field(
        description="succeeded: the sync ingest's 200 body (IngestResponse), exactly; otherwise null."
    )
    error: dict[str, Any] | None = Field(
        description="failed or aborted: the sync ingest's flat error body {status, error, code, request_id}, "
        "request_id being the submitting request's; otherwise null."
    )
