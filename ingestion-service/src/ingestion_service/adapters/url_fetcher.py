"""Documents fetched from a URL (the web loader, ingest by ``url``), guarded against server-side
request forgery.

Each hop of a fetch: the URL must be http(s) without credentials; its host is resolved once and
every address it resolves to must be public (not private, loopback, link-local, multicast,
reserved or unspecified; an IPv4-mapped, 6to4 or NAT64 IPv6 address is judged by the IPv4 address
it carries) unless URL_FETCH_ALLOW_NETWORKS lists it. The request then goes to the checked address
itself (the URL's host replaced by it, the ``Host`` header and TLS server name kept), so a second
DNS answer between the check and the connect (DNS rebinding) is never used. Redirects are followed
here, each target checked the same way, at most URL_FETCH_MAX_REDIRECTS; no proxy from the
environment is used (it would connect instead of us). The body is streamed to disk and stopped past
URL_FETCH_MAX_BYTES (counted after decompression; a larger Content-Length is refused before reading);
the whole fetch, redirects and body included, gets URL_FETCH_TIMEOUT_SECONDS; the final answer's
Content-Type must be one the extraction reads.
"""

from __future__ import annotations

import ipaddress
import mimetypes
import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import anyio
import anyio.to_thread
import httpx

from ingestion_service.errors import (
    UrlContentTypeError,
    UrlFetchFailedError,
    UrlFetchTimeoutError,
    UrlNotAllowedError,
    UrlTooLargeError,
)
from ingestion_service.settings import Settings
from ingestion_service.settings.fetch import IPNetwork
from shared_contract.redact import redact_url

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# host, port -> the addresses it resolves to.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

USER_AGENT = "ingestion-service (RAG web loader)"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_FLUSH_BYTES = 1024 * 1024
_MAX_NAME_CHARS = 200
DEFAULT_STEM = "download"
# NAT64's well-known prefix (RFC 6052): the gateway connects to the IPv4 address in the last 32 bits.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

# What the extraction reads (documents/sniffing.py still decides the real type from the bytes).
_READABLE_TYPES = frozenset(
    {
        "application/pdf",
        "application/xhtml+xml",
        "application/xml",
        "application/json",
        "application/rtf",
        "application/epub+zip",
        "application/msword",
        "application/vnd.ms-excel",
        "application/vnd.ms-powerpoint",
        "application/vnd.ms-outlook",
        "message/rfc822",
    }
)
_READABLE_PREFIXES = (
    "text/",
    "image/",
    "application/vnd.openxmlformats-officedocument.",
    "application/vnd.oasis.opendocument.",
)


def readable_type(media_type: str) -> bool:
    """Whether the extraction reads documents served as ``media_type`` (no parameters, lower case)."""
    return media_type in _READABLE_TYPES or media_type.startswith(_READABLE_PREFIXES)


def _judged_as(address: IPAddress) -> list[IPAddress]:
    """The addresses ``address`` is judged by: an IPv4-mapped or NAT64 one by the IPv4 address the
    connection reaches (DNS64 networks answer every public host so); a 6to4 one by both."""
    if isinstance(address, ipaddress.IPv4Address):
        return [address]
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address in _NAT64:
        return [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    if address.sixtofour is not None:
        return [address, address.sixtofour]
    return [address]


def _kind(address: IPAddress) -> str | None:
    """Why ``address`` is not public (``"a loopback address"``), or None when it is."""
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_private:
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "an address that is not publicly routable"
    return None


def address_refusal(address: IPAddress, allowed: Sequence[IPNetwork] = ()) -> str | None:
    """Why the fetcher may not connect to ``address``, or None: public, or in ``allowed``."""
    targets = _judged_as(address)
    if any(target.version == network.version and target in network for target in targets for network in allowed):
        return None
    for target in targets:
        kind = _kind(target)
        if kind is not None:
            return kind
    return None


async def resolve_host(host: str, port: int) -> Sequence[str]:
    """Every address ``host`` resolves to (the system resolver, in a worker thread)."""
    answers = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(sockaddr[0]) for *_, sockaddr in answers]


@dataclass(frozen=True)
class FetchedDocument:
    """A document fetched to ``path``: the name engines should see it under, where it came from."""

    path: Path
    filename: str
    url: str
    final_url: str
    media_type: str
    size: int


def document_filename(url: httpx.URL, media_type: str) -> str:
    """A file name for what ``url`` served: the path's last segment, with the served type's extension
    unless its own says the same type (engines and sniffing pick the parser by suffix)."""
    stem = unquote(PurePosixPath(url.path).name)
    stem = "".join(char for char in stem if char.isprintable() and char not in "/\\").strip(" .")
    stem = stem[:_MAX_NAME_CHARS] or DEFAULT_STEM
    if mimetypes.guess_type(stem)[0] == media_type:
        return stem
    extension = mimetypes.guess_extension(media_type, strict=False) or ""
    return stem + extension


def _host_header(url: httpx.URL) -> str:
    host = url.raw_host.decode("ascii")
    if ":" in host:
        host = f"[{host}]"
    return host if url.port is None else f"{host}:{url.port}"


class UrlFetcher:
    """Fetches one URL at a time to a local file, within the settings' refusals and limits."""

    def __init__(
        self,
        settings: Settings,
        *,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.enabled = settings.url_fetch_enabled
        self.allowed = settings.url_fetch_networks
        self.max_bytes = settings.url_fetch_max_bytes
        self.timeout_seconds = settings.url_fetch_timeout_seconds
        self.max_redirects = settings.url_fetch_max_redirects
        self._resolve = resolver if resolver is not None else resolve_host
        # One CA bundle load for the process, not one per fetch.
        self._ssl = ssl_context if ssl_context is not None else httpx.create_ssl_context()

    async def check(self, url: str) -> None:
        """Refuse ``url`` now as a fetch would before connecting: URL_NOT_ALLOWED, or URL_FETCH_FAILED when
        its host does not resolve (a later fetch checks again, redirects included)."""
        self._refuse_if_disabled()
        parsed = self._parse(url, redirected=False)
        try:
            with anyio.fail_after(self.timeout_seconds):
                await self._addresses(parsed, redirected=False)
        except TimeoutError as exc:
            raise UrlFetchTimeoutError(self.timeout_seconds) from exc

    def _refuse_if_disabled(self) -> None:
        if not self.enabled:
            raise UrlNotAllowedError("URL not allowed: this service fetches no URLs (URL_FETCH_ENABLED=false).")

    async def fetch(self, url: str, destination: Path) -> FetchedDocument:
        """Fetch ``url`` into ``destination``; every refusal and failure is a typed error."""
        self._refuse_if_disabled()
        try:
            with anyio.fail_after(self.timeout_seconds):
                return await self._fetch(url, destination)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise UrlFetchTimeoutError(self.timeout_seconds) from exc

    async def _fetch(self, url: str, destination: Path) -> FetchedDocument:
        current = self._parse(url, redirected=False)
        # No pooled connections: two hosts behind one address must never share a TLS session.
        async with httpx.AsyncClient(
            verify=self._ssl,
            trust_env=False,
            timeout=self.timeout_seconds,
            follow_redirects=False,
            limits=httpx.Limits(max_keepalive_connections=0),
            headers={"User-Agent": USER_AGENT, "Accept": "*/*"},
        ) as client:
            for hop in range(self.max_redirects + 1):
                request = await self._pinned_request(client, current, redirected=hop > 0)
                try:
                    response = await client.send(request, stream=True)
                except httpx.TimeoutException:
                    raise
                except httpx.HTTPError as exc:
                    raise UrlFetchFailedError(
                        "The URL's host could not be reached (connection or TLS failure).",
                        internal=f"fetching {redact_url(str(current))} failed: {type(exc).__name__}: {exc}",
                    ) from exc
                try:
                    if response.status_code in _REDIRECTS:
                        current = self._redirect_target(current, response)
                        continue
                    # Without a redirect the URL stays as sent (parsing may have normalised it).
                    return await self._save(url, url if hop == 0 else str(current), response, destination)
                finally:
                    await response.aclose()
        raise UrlFetchFailedError(
            f"The URL redirected more than URL_FETCH_MAX_REDIRECTS ({self.max_redirects}) times.",
            internal=f"{redact_url(url)}: more than {self.max_redirects} redirects",
        )

    def _parse(self, url: str, *, redirected: bool) -> httpx.URL:
        where = "The URL redirected to a URL that" if redirected else "The URL"
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise UrlNotAllowedError(f"{where} is not a valid URL.") from exc
        if parsed.scheme not in ("http", "https"):
            raise UrlNotAllowedError(f"{where} is not http(s); only http and https URLs are fetched.")
        if not parsed.raw_host:
            raise UrlNotAllowedError(f"{where} has no host.")
        if parsed.userinfo:
            raise UrlNotAllowedError(f"{where} carries credentials (user:password@); they are never sent.")
        return parsed.copy_with(fragment=None)

    def _redirect_target(self, current: httpx.URL, response: httpx.Response) -> httpx.URL:
        location = response.headers.get("location")
        if not location:
            raise UrlFetchFailedError(
                f"The URL answered HTTP {response.status_code} without a Location to follow.",
                internal=f"{redact_url(str(current))}: redirect without Location",
            )
        try:
            target = current.join(location)
        except httpx.InvalidURL as exc:
            raise UrlFetchFailedError(
                "The URL redirected to an invalid URL.", internal=f"{redact_url(str(current))}: bad Location"
            ) from exc
        return self._parse(str(target), redirected=True)

    async def _pinned_request(self, client: httpx.AsyncClient, url: httpx.URL, *, redirected: bool) -> httpx.Request:
        """The request for ``url`` addressed to the one checked address its host resolves to."""
        host = url.raw_host.decode("ascii")
        addresses = await self._addresses(url, redirected=redirected)
        return client.build_request(
            "GET",
            url.copy_with(host=str(addresses[0])),
            headers={"Host": _host_header(url)},
            # TLS checks the certificate against the URL's host, not the address connected to.
            extensions={"sni_hostname": host},
        )

    async def _addresses(self, url: httpx.URL, *, redirected: bool) -> list[IPAddress]:
        """Every address ``url``'s host resolves to, each one checked (URL_NOT_ALLOWED otherwise)."""
        host = url.raw_host.decode("ascii")
        port = url.port if url.port is not None else (443 if url.scheme == "https" else 80)
        try:
            answers = await self._resolve(host, port)
        except OSError as exc:
            raise UrlFetchFailedError(
                "The URL's host name does not resolve.", internal=f"resolving {host!r} failed: {exc}"
            ) from exc
        addresses = [ipaddress.ip_address(answer.split("%", 1)[0]) for answer in answers]
        if not addresses:
            raise UrlFetchFailedError("The URL's host name does not resolve.", internal=f"{host!r}: no addresses")
        for address in addresses:
            kind = address_refusal(address, self.allowed)
            if kind is not None:
                where = "The URL redirected to a host that" if redirected else "The URL's host"
                raise UrlNotAllowedError(
                    f"{where} resolves to {kind}, which is not fetched "
                    "(URL_FETCH_ALLOW_NETWORKS lists the networks that may be).",
                    internal=f"{host!r} resolves to {address} ({kind})",
                )
        return addresses

    async def _save(self, requested: str, final: str, response: httpx.Response, destination: Path) -> FetchedDocument:
        if not response.is_success:
            raise UrlFetchFailedError(
                f"The URL answered HTTP {response.status_code}.",
                internal=f"{redact_url(final)} answered HTTP {response.status_code}",
            )
        media_type = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if not readable_type(media_type):
            shown = media_type or "no Content-Type"
            raise UrlContentTypeError(
                f"The URL answered with {shown}, which is not a document type the extraction reads."
            )
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            raise UrlTooLargeError(self.max_bytes)
        size = await self._stream_to(response, destination)
        return FetchedDocument(
            path=destination,
            filename=document_filename(httpx.URL(final), media_type),
            url=requested,
            final_url=final,
            media_type=media_type,
            size=size,
        )

    async def _stream_to(self, response: httpx.Response, destination: Path) -> int:
        size = 0
        pending = bytearray()
        handle = await anyio.to_thread.run_sync(lambda: destination.open("wb"))
        try:
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self.max_bytes:
                    raise UrlTooLargeError(self.max_bytes)
                pending += chunk
                if len(pending) >= _FLUSH_BYTES:
                    data = bytes(pending)
                    pending.clear()
                    await anyio.to_thread.run_sync(handle.write, data)
            if pending:
                await anyio.to_thread.run_sync(handle.write, bytes(pending))
        except httpx.TimeoutException:
            raise
        except httpx.HTTPError as exc:
            raise UrlFetchFailedError(
                "The connection broke while the document was read.",
                internal=f"reading {redact_url(str(response.url))} failed: {type(exc).__name__}: {exc}",
            ) from exc
        finally:
            await anyio.to_thread.run_sync(handle.close)
        return size
