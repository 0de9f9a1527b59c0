"""benchmarks.http1: the lean client's requests on the wire, its framing of responses and its
connection reuse, against scripted asyncio servers on loopback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from benchmarks.http1 import Http1Client, Http1Error

Respond = Callable[[bytes, asyncio.StreamWriter], Awaitable[bool]]


class ScriptedServer:
    """Reads each request (head and Content-Length body) and lets ``respond`` answer it; ``respond``
    returns False to close the connection after answering."""

    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.requests: list[bytes] = []
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                if not await self.respond(request, writer):
                    return
        finally:
            writer.close()


def answer(status: int, body: bytes, *extra: str) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def json_ok(request: bytes, writer: asyncio.StreamWriter) -> bool:
    writer.write(answer(200, json.dumps({"echo": request.split(b"\r\n", 1)[0].decode()}).encode()))
    await writer.drain()
    return True


def test_a_post_goes_out_as_one_http11_request_with_the_default_headers_and_the_json_body() -> None:
    async def scenario() -> tuple[bytes, Any]:
        server = ScriptedServer(json_ok)
        async with server as url, Http1Client(f"{url}/base", headers={"Authorization": "Bearer k"}) as client:
            response = await client.post_json("/search", {"queries": ["q"], "k": 3})
        return server.requests[0], response

    request, response = asyncio.run(scenario())
    head, body = request.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /base/search HTTP/1.1"
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert headers["Authorization"] == "Bearer k"
    assert headers["Content-Type"] == "application/json"
    assert headers["Content-Length"] == str(len(body))
    assert headers["Host"].startswith("127.0.0.1:")
    assert json.loads(body) == {"queries": ["q"], "k": 3}
    assert response.status == 200
    assert response.json() == {"echo": "POST /base/search HTTP/1.1"}


def sequential_gets(respond: Respond, count: int) -> ScriptedServer:
    """``count`` GETs one after the other, each answered 200; the server, for its counts."""

    async def scenario() -> ScriptedServer:
        server = ScriptedServer(respond)
        async with server as url, Http1Client(url) as client:
            for _ in range(count):
                assert (await client.get("/x")).status == 200
        return server

    return asyncio.run(scenario())


def test_sequential_requests_reuse_one_kept_alive_connection() -> None:
    server = sequential_gets(json_ok, 3)
    assert len(server.requests) == 3
    assert server.connections == 1


def test_concurrent_requests_each_take_their_own_connection() -> None:
    async def slow(request: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.05)
        return await json_ok(request, writer)

    async def scenario() -> ScriptedServer:
        server = ScriptedServer(slow)
        async with server as url, Http1Client(url) as client:
            responses = await asyncio.gather(*(client.get(f"/{i}") for i in range(3)))
            assert [response.json()["echo"] for response in responses] == [f"GET /{i} HTTP/1.1" for i in range(3)]
        return server

    assert asyncio.run(scenario()).connections == 3


def test_a_chunked_body_is_reassembled() -> None:
    async def chunked(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"
        )
        await writer.drain()
        return True

    async def scenario() -> tuple[bytes, bytes]:
        server = ScriptedServer(chunked)
        async with server as url, Http1Client(url) as client:
            first = await client.get("/a")
            second = await client.get("/b")  # the framing left the connection at the next response
        return first.body, second.body

    assert asyncio.run(scenario()) == (b"hello, world", b"hello, world")


def test_connection_close_from_the_server_opens_a_new_connection_for_the_next_request() -> None:
    async def closing(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(200, b"{}", "Connection: close"))
        await writer.drain()
        return False

    assert sequential_gets(closing, 2).connections == 2


def test_a_kept_alive_connection_the_server_dropped_while_idle_is_retried_once_on_a_new_one() -> None:
    async def answer_then_drop(request: bytes, writer: asyncio.StreamWriter) -> bool:
        # Answers as if the connection stayed open, then closes it, as a server's idle timeout does.
        await json_ok(request, writer)
        return False

    async def scenario() -> ScriptedServer:
        server = ScriptedServer(answer_then_drop)
        async with server as url, Http1Client(url) as client:
            assert (await client.get("/first")).status == 200
            await asyncio.sleep(0.05)  # the server has closed the idle connection by now
            assert (await client.get("/second")).json() == {"echo": "GET /second HTTP/1.1"}
        return server

    server = asyncio.run(scenario())
    assert server.connections == 2
    assert [request.split(b"\r\n", 1)[0] for request in server.requests] == [
        b"GET /first HTTP/1.1",
        b"GET /second HTTP/1.1",
    ]


def test_an_error_status_comes_back_with_its_body() -> None:
    async def refuse(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(422, b'{"error": {"code": "INVALID_REQUEST"}}'))
        await writer.drain()
        return True

    async def scenario() -> Any:
        async with ScriptedServer(refuse) as url, Http1Client(url) as client:
            return await client.post_json("/search", {})

    response = asyncio.run(scenario())
    assert response.status == 422
    assert response.json() == {"error": {"code": "INVALID_REQUEST"}}


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", "mid-body"),  # never part of a body
        (b"SSH-2.0-OpenSSH\r\n\r\n", "status line"),
    ],
    ids=["body cut short", "not http"],
)
def test_a_response_it_cannot_trust_raises(reply: bytes, error: str) -> None:
    async def broken(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(reply)
        await writer.drain()
        return False

    async def scenario() -> None:
        async with ScriptedServer(broken) as url, Http1Client(url) as client:
            await client.get("/x")

    with pytest.raises(Http1Error, match=error):
        asyncio.run(scenario())


def test_only_plain_http_urls_are_accepted() -> None:
    with pytest.raises(ValueError, match="http://host:port"):
        Http1Client("https://example.org")
