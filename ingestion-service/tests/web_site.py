"""A real web site on 127.0.0.1 for the URL fetcher's tests: scripted pages, every GET recorded.

A page may redirect, lie about or leave out its length, or stall; ``https=True`` serves TLS with a
certificate for one host name, issued by a throwaway CA whose context :func:`WebSite.client_context`
returns (so a test can prove which name the client checked).
"""

from __future__ import annotations

import ssl
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, Self

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

GUARD_SECONDS = 30


@dataclass(frozen=True)
class Page:
    """What one path answers. ``length=None`` sends no Content-Length (the body ends with the connection)."""

    body: bytes = b""
    content_type: str | None = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    length: int | Literal["actual"] | None = "actual"
    # Seconds to stall after the headers, before the body (ends early when the site stops).
    stall: float = 0.0


@dataclass(frozen=True)
class Visit:
    """One GET as the site received it."""

    path: str
    host: str


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        site = self.server.site
        with site.lock:
            site.visits.append(Visit(path=self.path, host=self.headers.get("Host", "")))
        page = site.pages.get(self.path.split("?", 1)[0], Page(b"not found", "text/plain", 404))
        self.close_connection = True
        try:
            self.send_response(page.status)
            if page.content_type is not None:
                self.send_header("Content-Type", page.content_type)
            if page.length == "actual":
                self.send_header("Content-Length", str(len(page.body)))
            elif page.length is not None:
                self.send_header("Content-Length", str(page.length))
            for name, value in page.headers.items():
                self.send_header(name, value)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            if page.stall > 0 and site.stopping.wait(page.stall):
                return
            self.wfile.write(page.body)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the client stopped reading (a refusal mid-body): nothing more to send

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    site: WebSite


class WebSite:
    """Pages by path on ``http(s)://127.0.0.1:<port>``; start/stop, or use as a context manager."""

    def __init__(self, *, https_name: str | None = None) -> None:
        self.pages: dict[str, Page] = {}
        self.visits: list[Visit] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.site = self
        self._ca_pem: bytes | None = None
        if https_name is not None:
            context, self._ca_pem = _tls_for(https_name)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="web-site", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "/", *, host: str = "127.0.0.1") -> str:
        scheme = "https" if self._ca_pem is not None else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    def client_context(self) -> ssl.SSLContext:
        """A client TLS context trusting only this site's CA."""
        assert self._ca_pem is not None, "not an https site"
        return ssl.create_default_context(cadata=self._ca_pem.decode())

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=GUARD_SECONDS)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tls_for(host_name: str) -> tuple[ssl.SSLContext, bytes]:
    """A server context for ``host_name`` (and nothing else) and its issuing CA's certificate (PEM)."""
    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "web-site test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host_name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host_name)]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # load_cert_chain reads files only; they are not needed once loaded.
    with tempfile.TemporaryDirectory() as directory:
        cert_path, key_path = Path(directory) / "cert.pem", Path(directory) / "key.pem"
        cert_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        context.load_cert_chain(cert_path, key_path)
    return context, ca.public_bytes(serialization.Encoding.PEM)
