"""Request values read strictly, and refused in one shape.

JSON without Python's extensions (the store refuses what they let through), and a pydantic
``ValidationError`` of a request model as the INVALID_REQUEST the route answers. No web framework
here: the wire models use it and the CLI imports the wire models.
"""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn

from pydantic import ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from ingestion_service.errors import InvalidRequestError
from shared_contract.attributes import shown_key

# A form field refused with a message of its own: passed on as it is, not as "<field>: <message>".
FORM_FIELD_ERROR = "form_field"


class NotStrictJsonError(ValueError):
    """Text Python's json module reads that is not JSON, or cannot be read here (the reason, no value)."""


def _refuse_constant(_name: str) -> NoReturn:
    raise NotStrictJsonError("NaN and Infinity are not JSON numbers")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotStrictJsonError("a number is beyond float range")
    return value


def strict_json(text: str | bytes | bytearray) -> Any:
    """``json.loads`` without Python's extensions: NaN, Infinity and numbers past float range
    (which the store refuses) and nesting past the parser's recursion limit are ValueErrors."""
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError as exc:
        # The C parser recurses per level: a 10 KB body of "{" reaches the interpreter's limit.
        raise NotStrictJsonError("nested too deeply") from exc


def json_reason(exc: ValueError) -> str:
    """`` (why)`` for our own reasons; other ValueErrors' text is the parser's, not written for callers."""
    return f" ({exc})" if isinstance(exc, NotStrictJsonError) else ""


def form_field_error(message: str) -> PydanticCustomError:
    """A form field's refusal whose ``message`` is the whole answer (see :func:`invalid_request`)."""
    return PydanticCustomError(FORM_FIELD_ERROR, "{message}", {"message": message})


def _form_message(errors: list[ErrorDetails]) -> str | None:
    """What a form's first problem says, in the order the fields are checked: unknown fields, then
    each field's own refusal (a required one missing or blank included)."""
    unknown = sorted(str(error["loc"][0]) for error in errors if error["type"] == "extra_forbidden")
    if unknown:
        return f"Invalid request: unknown form field(s) {', '.join(map(shown_key, unknown))}."
    for error in errors:
        if error["type"] == FORM_FIELD_ERROR:
            return error["msg"]
        if error["type"] == "missing":
            return f"Invalid request: form field {error['loc'][0]!r} is required."
    return None


def invalid_request(exc: ValidationError, *, form: bool = False) -> InvalidRequestError:
    """A request model's ValidationError as INVALID_REQUEST: field locations and pydantic's messages
    (the first five), never the values sent; a form's field refusals as they are worded."""
    errors = exc.errors()
    message = _form_message(errors) if form else None
    if message is None:
        parts = []
        for error in errors[:5]:
            location = ".".join(str(part) for part in error["loc"]) or "body"
            parts.append(f"{location}: {error['msg']}")
        message = "Invalid request: " + "; ".join(parts)
    return InvalidRequestError(message)
