"""OpenAPI request bodies of the routes that read their body themselves (JSON or a streamed multipart).

FastAPI documents a body only for a declared body parameter; ingest and extract parse the raw
stream (to cap it as it arrives), so their bodies are declared here through ``openapi_extra``.
"""

from __future__ import annotations

from typing import Any

from ingestion_service.api.models import IngestFields, IngestRequestJSON, IngestRequestURL, WebLoaderRequest

_FILE_PART: dict[str, Any] = {
    "type": "string",
    "format": "binary",
    "description": "The document (capped by MAX_UPLOAD_BYTES).",
}


def _form_schema(title: str, fields: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "title": title,
        "type": "object",
        "properties": {"file": _FILE_PART, **fields},
        "required": ["file", *required],
    }


def _ingest_form() -> dict[str, Any]:
    schema = IngestFields.model_json_schema()
    # Form values arrive as text; overwrite is a strict word (true/false/1/0/yes/no).
    fields = dict(schema["properties"])
    fields["overwrite"] = {"type": "string", "default": "true", "description": "true/false/1/0/yes/no"}
    return _form_schema("IngestForm", fields, list(schema.get("required", [])))


INGEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "application/json: the document is read from S3/MinIO (s3_bucket, s3_key) or fetched "
        "from the web (url) (body capped at 64 KiB); multipart/form-data: the document is uploaded as the `file` part.",
        "content": {
            "application/json": {
                "schema": {"oneOf": [IngestRequestJSON.model_json_schema(), IngestRequestURL.model_json_schema()]}
            },
            "multipart/form-data": {"schema": _ingest_form()},
        },
    }
}

_EXTRACT_CHOICES: dict[str, dict[str, Any]] = {
    "engine": {
        "type": "string",
        "description": "An engine, or auto to see the routing decision (default: EXTRACTION_ENGINE).",
    },
    "engines": {
        "type": "string",
        "description": "Several engines, comma-separated, compared side by side (not with engine).",
    },
    "profile": {
        "type": "string",
        "description": "A vision profile: diagram, diagram-topology, general, figure, ocr.",
    },
}

EXTRACT_BODY: dict[str, Any] = {
    # Each choice is a form field or a query parameter (?engines=kreuzberg,pypdf), not both.
    "parameters": [
        {
            "name": name,
            "in": "query",
            "required": False,
            "schema": {"type": "string"},
            "description": schema["description"],
        }
        for name, schema in _EXTRACT_CHOICES.items()
    ],
    "requestBody": {
        "required": True,
        "content": {"multipart/form-data": {"schema": _form_schema("ExtractForm", dict(_EXTRACT_CHOICES), [])}},
    },
}

LOADER_BODY: dict[str, Any] = {
    "parameters": [
        {
            "name": "X-Filename",
            "in": "header",
            "required": False,
            "schema": {"type": "string"},
            "description": "The file's name, URL-quoted (Open WebUI sends its basename).",
        }
    ],
    "requestBody": {
        "required": True,
        "description": "The file's raw bytes (capped by MAX_UPLOAD_BYTES); Content-Type is its MIME type.",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    },
}

WEB_LOADER_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "The URLs to fetch and extract (body capped at 64 KiB).",
        "content": {"application/json": {"schema": WebLoaderRequest.model_json_schema()}},
    }
}
