"""Streaming multipart parsing: the file part goes to disk in 1 MiB writes, capped as it arrives.

Starlette's ``request.form()`` would accept the whole upload before any size check; this parser
rejects an oversized file as soon as the cap is crossed and never holds it in memory. The raw and
JSON bodies of the upload routes are read here too, capped the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import anyio.to_thread
from fastapi import Request
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect

from ingestion_service.api.validation import json_reason, strict_json
from ingestion_service.errors import (
    DOCUMENT_BODY_ADVICE,
    ClientDisconnectedError,
    InvalidRequestError,
    JsonBodyTooLargeError,
    PayloadTooLargeError,
)
from shared_contract.attributes import shown_key

FLUSH_BYTES = 1024 * 1024
MAX_FIELD_BYTES = 64 * 1024
MAX_FIELDS = 32
# Room for the form fields and part headers on top of the file itself.
FORM_OVERHEAD_BYTES = 1024 * 1024


@dataclass
class ParsedForm:
    """Text fields plus the one uploaded file (saved under ``file_path``)."""

    fields: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    file_path: Path | None = None
    file_field: str | None = None
    upload_filename: str | None = None
    file_size: int = 0


@dataclass
class _Part:
    name: str = ""
    filename: str | None = None
    is_file: bool = False
    data: bytearray = field(default_factory=bytearray)


class _FormCollector:
    """Parser callbacks; file bytes are buffered and flushed by the async driver."""

    def __init__(self, destination: Path, file_field: str, max_file_bytes: int) -> None:
        self.form = ParsedForm()
        self.destination = destination
        self.file_field = file_field
        self.max_file_bytes = max_file_bytes
        self.part = _Part()
        self.header_field = bytearray()
        self.header_value = bytearray()
        self.headers: dict[str, str] = {}
        self.pending = bytearray()
        self.handle: BinaryIO | None = None
        self.error: Exception | None = None
        # Set by the closing boundary; python-multipart's finalize() does not check for it.
        self.complete = False

    def fail(self, error: Exception) -> None:
        if self.error is None:
            self.error = error

    def on_part_begin(self) -> None:
        self.part = _Part()
        self.headers = {}

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def on_header_end(self) -> None:
        self.headers[self.header_field.decode("latin-1").lower()] = self.header_value.decode("latin-1")
        self.header_field = bytearray()
        self.header_value = bytearray()

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self.headers.get("content-disposition", ""))
        self.part.name = options.get(b"name", b"").decode("utf-8", "replace")
        filename = options.get(b"filename")
        if filename is None:
            if len(self.form.fields) >= MAX_FIELDS:
                self.fail(InvalidRequestError("Too many form fields."))
            return
        self.part.is_file = True
        self.part.filename = filename.decode("utf-8", "replace")
        if self.part.name != self.file_field:
            self.fail(
                InvalidRequestError(
                    f"Unexpected file field {shown_key(self.part.name)}; send the upload as {self.file_field!r}."
                )
            )
        elif self.handle is not None:
            self.fail(InvalidRequestError(f"Send exactly one {self.file_field!r} part."))
        else:
            # Opening a local temp file is a sub-millisecond syscall; the writes go to a thread.
            self.handle = self.destination.open("wb")
            self.form.file_path = self.destination
            self.form.file_field = self.part.name
            self.form.upload_filename = self.part.filename

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self.error is not None:
            return
        piece = data[start:end]
        if self.part.is_file:
            self.form.file_size += len(piece)
            if self.form.file_size > self.max_file_bytes:
                self.fail(PayloadTooLargeError(self.max_file_bytes))
                return
            self.pending += piece
        else:
            self.part.data += piece
            if len(self.part.data) > MAX_FIELD_BYTES:
                self.fail(InvalidRequestError(f"Form field {shown_key(self.part.name)} is too long."))

    def on_part_end(self) -> None:
        if self.error is None and not self.part.is_file:
            if self.part.name in self.form.fields:
                self.fail(InvalidRequestError(f"Form field {shown_key(self.part.name)} is repeated."))
                return
            self.form.fields[self.part.name] = self.part.data.decode("utf-8", "replace")

    def on_end(self) -> None:
        self.complete = True


async def _flush(collector: _FormCollector) -> None:
    if collector.pending and collector.handle is not None:
        chunk = bytes(collector.pending)
        collector.pending.clear()
        await anyio.to_thread.run_sync(collector.handle.write, chunk)


async def parse_multipart(
    request: Request, destination: Path, *, max_file_bytes: int, file_field: str = "file"
) -> ParsedForm:
    """Parse a multipart body, saving the ``file_field`` part to ``destination``."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_file_bytes + FORM_OVERHEAD_BYTES:
        raise PayloadTooLargeError(max_file_bytes)
    _, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary")
    if not boundary:
        raise InvalidRequestError("multipart/form-data without a boundary.")
    collector = _FormCollector(destination, file_field, max_file_bytes)
    parser = MultipartParser(
        boundary,
        callbacks={
            "on_part_begin": collector.on_part_begin,
            "on_part_data": collector.on_part_data,
            "on_part_end": collector.on_part_end,
            "on_header_field": collector.on_header_field,
            "on_header_value": collector.on_header_value,
            "on_header_end": collector.on_header_end,
            "on_headers_finished": collector.on_headers_finished,
            "on_end": collector.on_end,
        },
    )
    try:
        async for chunk in request.stream():
            parser.write(chunk)
            if collector.error is not None:
                raise collector.error
            if len(collector.pending) >= FLUSH_BYTES:
                await _flush(collector)
        parser.finalize()
        if collector.error is not None:
            raise collector.error
        if not collector.complete:
            # A body cut off mid-part would otherwise be indexed as a whole document.
            raise InvalidRequestError(
                "Invalid request: the multipart body ends before its closing boundary (incomplete upload)."
            )
        await _flush(collector)
    except FormParserError as exc:
        raise InvalidRequestError("Malformed multipart body.") from exc
    except ClientDisconnect as exc:
        raise ClientDisconnectedError("client disconnected during the upload") from exc
    finally:
        if collector.handle is not None:
            await anyio.to_thread.run_sync(collector.handle.close)
    return collector.form


async def save_raw_body(request: Request, destination: Path, *, max_bytes: int) -> int:
    """Stream a raw (non-multipart) body to ``destination``, capped at ``max_bytes``; returns its size."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise PayloadTooLargeError(max_bytes)
    size = 0
    pending = bytearray()
    handle = destination.open("wb")
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise PayloadTooLargeError(max_bytes)
            pending += chunk
            if len(pending) >= FLUSH_BYTES:
                data = bytes(pending)
                pending.clear()
                await anyio.to_thread.run_sync(handle.write, data)
        if pending:
            await anyio.to_thread.run_sync(handle.write, bytes(pending))
    except ClientDisconnect as exc:
        raise ClientDisconnectedError("client disconnected during the upload") from exc
    finally:
        await anyio.to_thread.run_sync(handle.close)
    return size


async def read_json_object(request: Request, *, max_bytes: int, advice: str = DOCUMENT_BODY_ADVICE) -> dict[str, Any]:
    """A JSON object body, strictly parsed, read no further than ``max_bytes`` (the upload routes'
    edge cap is MAX_UPLOAD_BYTES; their JSON bodies are small)."""
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_bytes:
                raise JsonBodyTooLargeError(max_bytes, advice=advice)
    except ClientDisconnect as exc:
        raise ClientDisconnectedError("client disconnected while sending the body") from exc
    try:
        data = strict_json(body)
    except ValueError as exc:
        raise InvalidRequestError(f"Invalid request: body is not valid JSON{json_reason(exc)}.") from exc
    if not isinstance(data, dict):
        raise InvalidRequestError("Invalid request: body must be a JSON object.")
    return data
