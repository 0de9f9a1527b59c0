"""Real loopback HTTP servers standing in for a vision LLM and for Gotenberg.

Each runs a threaded ``http.server`` on 127.0.0.1 (port 0) in a background thread, records every
request and answers as scripted, so engines are tested through their real HTTP clients.
"""

from __future__ import annotations

import base64
import ctypes
import io
import ipaddress
import json
import ssl
import tempfile
import threading
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, Self

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = RecordedRequest(
            method="POST",
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=self.rfile.read(length),
        )
        owner = self.server.owner
        with owner.lock:
            owner.requests.append(request)
        status, content_type, body, delay = owner.answer(request)
        # A scripted delay ends early when the server stops, so teardown never waits it out.
        if delay > 0 and owner.stopping.wait(delay):
            return
        self.close_connection = True
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            # One request per connection: a stopped server leaves no kept-alive connection answering.
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its read timeout): nothing to answer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: LoopbackServer


class LoopbackServer:
    """Base: start/stop a threaded server on 127.0.0.1; usable as a context manager."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.requests: list[RecordedRequest] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        if ssl_context is not None:
            self._server.socket = ssl_context.wrap_socket(self._server.socket, server_side=True)
        self._scheme = "https" if ssl_context is not None else "http"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=type(self).__name__, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http(s)://127.0.0.1:<port>`` (no trailing slash)."""
        return f"{self._scheme}://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def answer(self, request: RecordedRequest) -> tuple[int, str, bytes, float]:
        """(status, content type, body, delay in seconds) for ``request``."""
        raise NotImplementedError


@dataclass(frozen=True)
class VisionReply:
    """One scripted chat-completions answer. ``content=None`` echoes the number of images received."""

    content: str | None = None
    finish_reason: str = "stop"
    status: int = 200
    delay: float = 0.0


class ScriptedVisionServer(LoopbackServer):
    """OpenAI-compatible ``POST /v1/chat/completions``.

    Replies queued with :meth:`script` are used in order, then :attr:`default`. The default answer
    is ``"# Vision answer\\n\\nimages: <n>"``, n being the ``image_url`` parts of the request.
    """

    default = VisionReply()

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__(ssl_context=ssl_context)
        self._replies: deque[VisionReply] = deque()

    @property
    def base_url(self) -> str:
        """What VISION_LLM_API_BASE_URL should be: ``<url>/v1``."""
        return f"{self.url}/v1"

    def script(self, *replies: VisionReply) -> None:
        """Queue replies for the next requests."""
        with self.lock:
            self._replies.extend(replies)

    def answer(self, request: RecordedRequest) -> tuple[int, str, bytes, float]:
        with self.lock:
            reply = self._replies.popleft() if self._replies else self.default
        if request.path != "/v1/chat/completions":
            return 404, "application/json", b'{"error": {"message": "not found"}}', 0.0
        if reply.status >= 300:
            error = {"error": {"message": f"scripted failure {reply.status}", "type": "server_error"}}
            return reply.status, "application/json", json.dumps(error).encode(), reply.delay
        payload = request.json()
        content = (
            reply.content if reply.content is not None else f"# Vision answer\n\nimages: {len(image_urls(request))}"
        )
        body: dict[str, Any] = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": 0,
            "model": payload.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return 200, "application/json", json.dumps(body).encode(), reply.delay


def _content_parts(request: RecordedRequest) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for message in request.json().get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            parts.extend(part for part in content if isinstance(part, dict))
        elif isinstance(content, str):
            parts.append({"type": "text", "text": content})
    return parts


def image_urls(request: RecordedRequest) -> list[str]:
    """The ``image_url`` URLs of a chat-completions request, in order."""
    return [part["image_url"]["url"] for part in _content_parts(request) if part.get("type") == "image_url"]


def images(request: RecordedRequest) -> list[bytes]:
    """The images of a chat-completions request, decoded from their ``data:`` URLs."""
    decoded: list[bytes] = []
    for url in image_urls(request):
        header, _, data = url.partition(",")
        assert header.endswith(";base64"), header
        decoded.append(base64.b64decode(data))
    return decoded


def prompt_text(request: RecordedRequest) -> str:
    """The text parts of a chat-completions request, joined."""
    return "\n".join(part["text"] for part in _content_parts(request) if part.get("type") == "text")


def blank_pdf(*sizes: tuple[float, float]) -> bytes:
    """A real PDF with one blank page per (width, height) in points, written by PDFium."""
    document = pdfium.PdfDocument.new()
    try:
        for width, height in sizes:
            document.new_page(width, height).close()
        buffer = io.BytesIO()
        document.save(buffer)
    finally:
        document.close()
    return buffer.getvalue()


def text_pdf(pages: list[list[str]], *, size: tuple[float, float] = (612.0, 792.0)) -> bytes:
    """A real PDF whose pages hold these lines of text (Helvetica 10 pt, top down), written by PDFium:
    what LibreOffice's rendering of a document holding that text would be to a text layer."""
    document = pdfium.PdfDocument.new()
    try:
        font = pdfium_c.FPDFText_LoadStandardFont(document.raw, b"Helvetica")
        for lines in pages:
            page = document.new_page(*size)
            for number, line in enumerate(lines):
                text = pdfium_c.FPDFPageObj_CreateTextObj(document.raw, font, 10.0)
                buffer = ctypes.create_string_buffer((line + "\0").encode("utf-16-le"))
                pdfium_c.FPDFText_SetText(text, ctypes.cast(buffer, ctypes.POINTER(pdfium_c.FPDF_WCHAR)))
                pdfium_c.FPDFPageObj_Transform(text, 1, 0, 0, 1, 54, size[1] - 54 - 14 * number)
                pdfium_c.FPDFPage_InsertObject(page.raw, text)
            pdfium_c.FPDFPage_GenerateContent(page.raw)
            page.close()
        buffer_out = io.BytesIO()
        document.save(buffer_out)
    finally:
        document.close()
    return buffer_out.getvalue()


@dataclass(frozen=True)
class Upload:
    """A file Gotenberg received in the multipart field ``files``."""

    filename: str
    content: bytes
    content_type: str


class GotenbergStandIn(LoopbackServer):
    """``POST /forms/libreoffice/convert``: records the uploads and answers with :attr:`pdf`.

    The default PDF has two blank pages of 200 x 100 pt, so tests can tell its pages by their size.
    Set :attr:`status` to answer with that HTTP status instead, :attr:`delay` to answer late.
    """

    PAGE_SIZE: ClassVar[tuple[float, float]] = (200.0, 100.0)

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__(ssl_context=ssl_context)
        self.pdf = blank_pdf(self.PAGE_SIZE, self.PAGE_SIZE)
        self.status = 200
        self.delay = 0.0
        self.uploads: list[Upload] = []

    def answer(self, request: RecordedRequest) -> tuple[int, str, bytes, float]:
        if request.path != "/forms/libreoffice/convert":
            return 404, "text/plain", b"Not Found", 0.0
        uploads = _multipart_files(request)
        with self.lock:
            self.uploads.extend(uploads)
        if self.status >= 300:
            return self.status, "text/plain", f"scripted failure {self.status}".encode(), self.delay
        if not uploads:
            return 400, "text/plain", b"no form file found for extensions", self.delay
        return 200, "application/pdf", self.pdf, self.delay


def _multipart_files(request: RecordedRequest) -> list[Upload]:
    """The parts of a multipart/form-data body named ``files``."""
    head = f"Content-Type: {request.headers.get('content-type', '')}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + request.body)
    uploads: list[Upload] = []
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") != "files":
            continue
        payload = part.get_payload(decode=True)
        assert isinstance(payload, bytes)
        uploads.append(Upload(part.get_filename() or "", payload, part.get_content_type()))
    return uploads


def self_signed_context() -> ssl.SSLContext:
    """A server TLS context with a fresh self-signed certificate for 127.0.0.1 (no CA trusts it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # load_cert_chain reads files only; they are not needed once loaded.
    with tempfile.TemporaryDirectory() as directory:
        cert_path, key_path = Path(directory) / "cert.pem", Path(directory) / "key.pem"
        cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        context.load_cert_chain(cert_path, key_path)
    return context
