"""The HTTP edge both services share: error shape and status policy, request ids, the API-key and
body-cap middleware, log formatting and the OpenAPI declarations (see docs/contract.md, Errors)."""

from shared_contract.http.errors import (
    INVALID_REQUEST,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PAYLOAD_TOO_LARGE,
    UNAUTHORIZED,
    UNSUPPORTED_MEDIA_TYPE,
    ErrorBody,
    error_content,
    error_response,
    install_framework_error_handlers,
    validation_message,
)
from shared_contract.http.logs import JsonFormatter, LogFormat, RequestIdFilter, configure_logging, log_handler
from shared_contract.http.middleware import (
    BodyLimit,
    EdgeMiddleware,
    RequestBodyTooLargeError,
    bearer_token_matches,
    public_paths,
)
from shared_contract.http.openapi import ERROR_RESPONSES, PROMETHEUS_TEXT_RESPONSE, bearer_scheme
from shared_contract.http.request_id import REQUEST_ID_HEADER, current_request_id, request_id_of

__all__ = [
    "ERROR_RESPONSES",
    "INVALID_REQUEST",
    "METHOD_NOT_ALLOWED",
    "NOT_FOUND",
    "PAYLOAD_TOO_LARGE",
    "PROMETHEUS_TEXT_RESPONSE",
    "REQUEST_ID_HEADER",
    "UNAUTHORIZED",
    "UNSUPPORTED_MEDIA_TYPE",
    "BodyLimit",
    "EdgeMiddleware",
    "ErrorBody",
    "JsonFormatter",
    "LogFormat",
    "RequestBodyTooLargeError",
    "RequestIdFilter",
    "bearer_scheme",
    "bearer_token_matches",
    "configure_logging",
    "current_request_id",
    "error_content",
    "error_response",
    "install_framework_error_handlers",
    "log_handler",
    "public_paths",
    "request_id_of",
    "validation_message",
]
