"""The HTTP edge both services share: error shape (``shared_contract.error_body``), status policy, the
response of an error its service's table classified, request
ids, the API-key and body-cap middleware, CORS, log formatting (with the one ``request_failed`` line per
failure) and the OpenAPI declarations (see docs/contract.md, Errors)."""

from rag_runtime.http.bodies import NOT_JSON_MESSAGE, require_json_body
from rag_runtime.http.cors import cors_origins, install_cors
from rag_runtime.http.errors import (
    FALLBACK_HINT,
    SHUTTING_DOWN_MESSAGE,
    classified_response,
    error_content,
    error_response,
    hint_for,
    install_framework_error_handlers,
    validation_message,
)
from rag_runtime.http.logs import (
    LOGGED_REQUEST_FIELDS,
    REQUEST_FAILED,
    JsonFormatter,
    LogFormat,
    RequestIdFilter,
    TextFormatter,
    configure_logging,
    log_handler,
    log_request_failed,
    note_request_fields,
)
from rag_runtime.http.middleware import (
    BodyLimit,
    EdgeMiddleware,
    RequestBodyTooLargeError,
    bearer_token_matches,
    public_paths,
)
from rag_runtime.http.openapi import ERROR_RESPONSES, PROMETHEUS_TEXT_RESPONSE, bearer_scheme
from rag_runtime.http.request_id import REQUEST_ID_HEADER, current_request_id, request_id_of
from shared_contract.error_codes import (
    COLLECTION_MISMATCH,
    COLLECTION_MISSING,
    EMBEDDING_FAILED,
    INVALID_REQUEST,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PAYLOAD_TOO_LARGE,
    QDRANT_UNAVAILABLE,
    SHUTTING_DOWN,
    SPARSE_EMBEDDING_FAILED,
    STORE_INCOMPATIBLE,
    UNAUTHORIZED,
)

__all__ = [
    "COLLECTION_MISMATCH",
    "COLLECTION_MISSING",
    "EMBEDDING_FAILED",
    "ERROR_RESPONSES",
    "FALLBACK_HINT",
    "INVALID_REQUEST",
    "LOGGED_REQUEST_FIELDS",
    "METHOD_NOT_ALLOWED",
    "NOT_FOUND",
    "NOT_JSON_MESSAGE",
    "PAYLOAD_TOO_LARGE",
    "PROMETHEUS_TEXT_RESPONSE",
    "QDRANT_UNAVAILABLE",
    "REQUEST_FAILED",
    "REQUEST_ID_HEADER",
    "SHUTTING_DOWN",
    "SHUTTING_DOWN_MESSAGE",
    "SPARSE_EMBEDDING_FAILED",
    "STORE_INCOMPATIBLE",
    "UNAUTHORIZED",
    "BodyLimit",
    "EdgeMiddleware",
    "JsonFormatter",
    "LogFormat",
    "RequestBodyTooLargeError",
    "RequestIdFilter",
    "TextFormatter",
    "bearer_scheme",
    "bearer_token_matches",
    "classified_response",
    "configure_logging",
    "cors_origins",
    "current_request_id",
    "error_content",
    "error_response",
    "hint_for",
    "install_cors",
    "install_framework_error_handlers",
    "log_handler",
    "log_request_failed",
    "note_request_fields",
    "public_paths",
    "request_id_of",
    "require_json_body",
    "validation_message",
]
