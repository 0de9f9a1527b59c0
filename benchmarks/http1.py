"""A lean keep-alive HTTP/1.1 client for latency measurements.

httpx's async client spends ~1.3 ms of its own per request on this machine (docs/benchmarks.md,
"The measuring client"), as much as a fifth of a search. Load generators such as wrk keep their
own cost near the socket's; this client does too: asyncio streams, one request at a time per
connection, idle connections kept for reuse. It speaks what the services answer: a status line,
headers, and a body framed by Content-Length or chunked transfer encoding. Not a general client
(no redirects, proxies, TLS or compression).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

_MAX_HEAD_BYTES = 64 * 1024


class Http1Error(RuntimeError):
    """The server broke the protocol or the connection ended mid-response."""


class _ClosedBeforeResponse(Http1Error):
    """The server closed the connection without answering (a kept-alive one it timed out)."""


@dataclass(frozen=True)
class Http1Response:
    status: int
    headers: dict[str, str]  # names lower-cased; a repeated header keeps its last value
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def exchange(self, request: bytes, *, head_only: bool) -> tuple[Http1Response, bool]:
        """Send ``request``, read the response; also whether the connection may be reused."""
        self.writer.write(request)
        await self.writer.drain()
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError as exc:
            raise Http1Error("response head over 64 KiB") from exc
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise Http1Error("connection closed mid-head") from exc
            raise _ClosedBeforeResponse("connection closed before a response") from exc
        lines = head[:-4].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise Http1Error(f"not an HTTP/1.x status line: {lines[0][:100]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, separator, value = line.partition(":")
            if not separator:
                raise Http1Error(f"malformed header line: {line[:100]!r}")
            headers[name.strip().lower()] = value.strip()
        reusable = headers.get("connection", "").lower() != "close" and parts[0] == "HTTP/1.1"
        try:
            if head_only or status in (204, 304) or 100 <= status < 200:
                body = b""
            elif headers.get("transfer-encoding", "").lower() == "chunked":
                body = await self._chunked()
            elif "content-length" in headers:
                body = await self.reader.readexactly(int(headers["content-length"]))
            else:  # the body runs to the end of the connection
                body = await self.reader.read()
                reusable = False
        except asyncio.IncompleteReadError as exc:
            raise Http1Error("connection closed mid-body") from exc
        return Http1Response(status=status, headers=headers, body=body), reusable

    async def _chunked(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            size_line = await self.reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while await self.reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                return b"".join(chunks)
            chunks.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)

    def close(self) -> None:
        self.writer.close()


class Http1Client:
    """Requests to one ``http://host:port`` base URL, with default headers; an async context manager.

    Concurrent requests each take an idle connection or open one, so ``c`` tasks use ``c``
    connections, as a keep-alive pool does.
    """

    def __init__(self, base_url: str, *, headers: dict[str, str] | None = None, timeout: float = 600.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"an http://host:port URL is needed, not {base_url!r}")
        self._host = parts.hostname
        self._port = parts.port or 80
        self._prefix = parts.path.rstrip("/")
        host_header = parts.netloc
        fixed = {"Host": host_header, "User-Agent": "rag-benchmarks", **(headers or {})}
        self._fixed_head = "".join(f"{name}: {value}\r\n" for name, value in fixed.items())
        self._timeout = timeout
        self._idle: list[_Connection] = []

    async def __aenter__(self) -> Http1Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    async def get(self, path: str) -> Http1Response:
        return await self.request("GET", path)

    async def post_json(self, path: str, payload: Any) -> Http1Response:
        return await self.request(
            "POST", path, json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
        )

    async def request(
        self, method: str, path: str, body: bytes | None = None, *, headers: dict[str, str] | None = None
    ) -> Http1Response:
        head = f"{method} {self._prefix}{path} HTTP/1.1\r\n{self._fixed_head}"
        for name, value in (headers or {}).items():
            head += f"{name}: {value}\r\n"
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head += f"Content-Length: {len(body or b'')}\r\n"
        request = (head + "\r\n").encode("latin-1") + (body or b"")
        async with asyncio.timeout(self._timeout):
            return await self._send(request, head_only=method == "HEAD")

    async def _send(self, request: bytes, *, head_only: bool) -> Http1Response:
        reused = bool(self._idle)
        connection = self._idle.pop() if reused else await self._open()
        try:
            response, reusable = await connection.exchange(request, head_only=head_only)
        except (_ClosedBeforeResponse, ConnectionResetError, BrokenPipeError):
            connection.close()
            if not reused:
                raise
            # A kept-alive connection the server closed while idle: once more on a fresh one.
            connection = await self._open()
            try:
                response, reusable = await connection.exchange(request, head_only=head_only)
            except BaseException:
                connection.close()
                raise
        except BaseException:
            connection.close()
            raise
        if reusable:
            self._idle.append(connection)
        else:
            connection.close()
        return response

    async def _open(self) -> _Connection:
        reader, writer = await asyncio.open_connection(self._host, self._port, limit=_MAX_HEAD_BYTES)
        return _Connection(reader, writer)
