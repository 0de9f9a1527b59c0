"""The URL fetcher against a real web site on 127.0.0.1: every refusal, and what it fetches.

Loopback is itself a refused address, so tests that must reach the site allow 127.0.0.1/32
(URL_FETCH_ALLOW_NETWORKS), and the refusal tests leave it out to show the site is never asked.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ingestion_service.adapters.url_fetcher import FetchedDocument, UrlFetcher, address_refusal
from ingestion_service.errors import (
    IngestionError,
    UrlContentTypeError,
    UrlFetchFailedError,
    UrlFetchTimeoutError,
    UrlNotAllowedError,
    UrlTooLargeError,
)

from ..web_site import Page, WebSite  # noqa: TID252

if TYPE_CHECKING:
    from ..conftest import MakeSettings  # noqa: TID252

pytestmark = pytest.mark.anyio

LOOPBACK = "127.0.0.1/32"
HTML = b"<html><head><title>Fetched</title></head><body><p>Hello from the site.</p></body></html>"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FixedResolver:
    """Answers every name with fixed addresses (then ``later`` from the second lookup on) and counts lookups."""

    def __init__(self, *addresses: str, later: Sequence[str] | None = None) -> None:
        self.addresses = list(addresses)
        self.later = list(later) if later is not None else None
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.lookups.append(host)
        if len(self.lookups) > 1 and self.later is not None:
            return self.later
        return self.addresses


def fetcher(make_test_settings: MakeSettings, *, allow: str = "", **overrides: Any) -> UrlFetcher:
    resolver = overrides.pop("resolver", None)
    ssl_context = overrides.pop("ssl_context", None)
    settings = make_test_settings(url_fetch_allow_networks=allow, **overrides)
    return UrlFetcher(settings, resolver=resolver, ssl_context=ssl_context)


async def refused(fetch: UrlFetcher, url: str, tmp_path: Path) -> IngestionError:
    with pytest.raises(IngestionError) as caught:
        await fetch.fetch(url, tmp_path / "download.part")
    return caught.value


# --- what it fetches --------------------------------------------------------------------------------


async def test_an_allow_listed_loopback_page_is_fetched_to_disk(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    web_site.pages["/articles/hello"] = Page(HTML)
    fetched = await fetcher(make_test_settings, allow=LOOPBACK).fetch(
        web_site.url("/articles/hello"), tmp_path / "download.part"
    )
    assert fetched == FetchedDocument(
        path=tmp_path / "download.part",
        filename="hello.html",
        url=web_site.url("/articles/hello"),
        final_url=web_site.url("/articles/hello"),
        media_type="text/html",
        size=len(HTML),
    )
    assert fetched.path.read_bytes() == HTML


async def test_redirects_are_followed_and_the_final_url_reported(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    web_site.pages["/old"] = Page(status=301, headers={"Location": "/docs/report"})
    web_site.pages["/docs/report"] = Page(b"%PDF-1.4 not really", "application/pdf")
    fetched = await fetcher(make_test_settings, allow=LOOPBACK).fetch(web_site.url("/old"), tmp_path / "d")
    assert (fetched.url, fetched.final_url) == (web_site.url("/old"), web_site.url("/docs/report"))
    assert fetched.filename == "report.pdf"
    assert [visit.path for visit in web_site.visits] == ["/old", "/docs/report"]


async def test_the_connection_goes_to_the_checked_address_not_a_second_lookup(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    # A rebinding resolver: the checked answer is loopback (allowed), any later answer a private address.
    # ".invalid" never resolves, so the page is reached only if the checked address itself is dialled.
    resolver = FixedResolver("127.0.0.1", later=["10.0.0.1"])
    web_site.pages["/"] = Page(HTML)
    fetch = fetcher(make_test_settings, allow=LOOPBACK, resolver=resolver)
    fetched = await fetch.fetch(web_site.url("/", host="rebind.invalid"), tmp_path / "d")
    assert fetched.path.read_bytes() == HTML
    assert resolver.lookups == ["rebind.invalid"]
    assert web_site.visits[0].host == f"rebind.invalid:{web_site.port}"


async def test_tls_is_checked_against_the_url_host_while_connecting_to_its_address(
    make_test_settings: MakeSettings, tmp_path: Path
) -> None:
    with WebSite(https_name="docs.example.test") as site:
        site.pages["/guide.md"] = Page(b"# Guide\n\nSteps.", "text/markdown")
        fetch = fetcher(
            make_test_settings, allow=LOOPBACK, resolver=FixedResolver("127.0.0.1"), ssl_context=site.client_context()
        )
        fetched = await fetch.fetch(site.url("/guide.md", host="docs.example.test"), tmp_path / "d")
        assert fetched.path.read_bytes() == b"# Guide\n\nSteps."
        # The same address under a name the certificate does not carry is refused by TLS.
        error = await refused(fetch, site.url("/guide.md", host="other.example.test"), tmp_path)
    assert isinstance(error, UrlFetchFailedError)
    assert error.status_code == 502


# --- refusals before any request ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/file.pdf", "file:///etc/passwd", "gopher://example.com/", "javascript:alert(1)"],
)
async def test_only_http_and_https_are_fetched(make_test_settings: MakeSettings, tmp_path: Path, url: str) -> None:
    error = await refused(fetcher(make_test_settings), url, tmp_path)
    assert isinstance(error, UrlNotAllowedError)
    assert (error.code, error.status_code) == ("URL_NOT_ALLOWED", 422)
    assert "only http and https" in error.detail()


async def test_credentials_in_the_url_are_refused(make_test_settings: MakeSettings, tmp_path: Path) -> None:
    error = await refused(fetcher(make_test_settings), "http://user:secret@example.com/", tmp_path)
    assert isinstance(error, UrlNotAllowedError)
    assert "credentials" in error.detail()
    assert "secret" not in error.detail()


async def test_loopback_is_refused_without_the_allow_list_and_never_asked(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    web_site.pages["/"] = Page(HTML)
    error = await refused(fetcher(make_test_settings), web_site.url("/"), tmp_path)
    assert isinstance(error, UrlNotAllowedError)
    assert "loopback" in error.detail()
    assert "127.0.0.1" not in error.detail()  # the body never names the address; the log line does
    assert "127.0.0.1" in str(error)
    assert web_site.visits == []


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("[::1]", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("[fd00::1]", "private"),
        ("169.254.169.254", "link-local"),
        ("[fe80::1]", "link-local"),
        ("[::ffff:127.0.0.1]", "loopback"),
        ("[::ffff:169.254.169.254]", "link-local"),
        ("[::ffff:10.0.0.1]", "private"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("100.64.0.1", "not publicly routable"),
    ],
)
async def test_non_public_addresses_are_refused(
    make_test_settings: MakeSettings, tmp_path: Path, host: str, kind: str
) -> None:
    error = await refused(fetcher(make_test_settings), f"http://{host}:8080/page", tmp_path)
    assert isinstance(error, UrlNotAllowedError)
    assert kind in error.detail()
    assert "URL_FETCH_ALLOW_NETWORKS" in error.detail()


async def test_a_name_with_any_private_answer_is_refused(make_test_settings: MakeSettings, tmp_path: Path) -> None:
    resolver = FixedResolver("93.184.215.14", "10.0.0.7")
    error = await refused(fetcher(make_test_settings, resolver=resolver), "http://mixed.example.test/", tmp_path)
    assert isinstance(error, UrlNotAllowedError)
    assert "private" in error.detail()


async def test_localhost_by_name_is_refused(make_test_settings: MakeSettings, tmp_path: Path) -> None:
    error = await refused(fetcher(make_test_settings), "http://localhost:9/", tmp_path)
    assert isinstance(error, UrlNotAllowedError)
    assert "loopback" in error.detail()


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("93.184.215.14", None),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", None),
        ("::ffff:93.184.215.14", None),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("64:ff9b::a00:1", "a private address"),  # NAT64 to 10.0.0.1
        ("64:ff9b::5db8:d70e", None),  # NAT64 to a public address (DNS64 networks)
        ("2002:7f00:1::1", "a loopback address"),  # 6to4 carrying 127.0.0.1
        ("::", "an unspecified address"),
        ("ff02::1", "a multicast address"),
        ("240.0.0.1", "a private address"),
    ],
)
def test_address_refusal_judges_embedded_ipv4(address: str, expected: str | None) -> None:
    assert address_refusal(ipaddress.ip_address(address)) == expected


def test_the_allow_list_admits_its_networks_only() -> None:
    allowed = [ipaddress.ip_network("10.20.0.0/16"), ipaddress.ip_network("fd00:1::/32")]
    assert address_refusal(ipaddress.ip_address("10.20.3.4"), allowed) is None
    assert address_refusal(ipaddress.ip_address("::ffff:10.20.3.4"), allowed) is None
    assert address_refusal(ipaddress.ip_address("fd00:1::5"), allowed) is None
    assert address_refusal(ipaddress.ip_address("10.21.0.1"), allowed) == "a private address"


# --- refusals on what the site answers ---------------------------------------------------------------


async def test_a_redirect_to_a_private_address_is_refused(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    web_site.pages["/go"] = Page(status=302, headers={"Location": "http://169.254.169.254/latest/meta-data/"})
    error = await refused(fetcher(make_test_settings, allow=LOOPBACK), web_site.url("/go"), tmp_path)
    assert isinstance(error, UrlNotAllowedError)
    assert error.detail().startswith("The URL redirected to a host that resolves to a link-local address")


async def test_a_redirect_to_loopback_over_ipv6_is_refused_when_only_ipv4_loopback_is_allowed(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    web_site.pages["/go"] = Page(status=307, headers={"Location": f"http://[::1]:{web_site.port}/"})
    error = await refused(fetcher(make_test_settings, allow=LOOPBACK), web_site.url("/go"), tmp_path)
    assert isinstance(error, UrlNotAllowedError)
    assert [visit.path for visit in web_site.visits] == ["/go"]


async def test_a_redirect_to_another_scheme_is_refused(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    web_site.pages["/go"] = Page(status=302, headers={"Location": "file:///etc/passwd"})
    error = await refused(fetcher(make_test_settings, allow=LOOPBACK), web_site.url("/go"), tmp_path)
    assert isinstance(error, UrlNotAllowedError)
    assert "redirected" in error.detail()


async def test_more_redirects_than_the_limit_fail(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    web_site.pages["/a"] = Page(status=302, headers={"Location": "/b"})
    web_site.pages["/b"] = Page(status=302, headers={"Location": "/a"})
    fetch = fetcher(make_test_settings, allow=LOOPBACK, url_fetch_max_redirects=2)
    error = await refused(fetch, web_site.url("/a"), tmp_path)
    assert isinstance(error, UrlFetchFailedError)
    assert (error.code, error.status_code) == ("URL_FETCH_FAILED", 502)
    assert "URL_FETCH_MAX_REDIRECTS (2)" in error.detail()
    assert [visit.path for visit in web_site.visits] == ["/a", "/b", "/a"]


async def test_a_declared_length_over_the_cap_is_refused_before_the_body(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    web_site.pages["/big.pdf"] = Page(b"%PDF-" + b"x" * 5000, "application/pdf")
    fetch = fetcher(make_test_settings, allow=LOOPBACK, url_fetch_max_bytes=1000)
    error = await refused(fetch, web_site.url("/big.pdf"), tmp_path)
    assert isinstance(error, UrlTooLargeError)
    assert (error.code, error.status_code) == ("DOCUMENT_TOO_LARGE", 413)
    assert "URL_FETCH_MAX_BYTES (1000 bytes)" in error.detail()
    assert not (tmp_path / "download.part").exists()


async def test_an_undeclared_body_is_cut_off_past_the_cap(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    web_site.pages["/stream.txt"] = Page(b"line\n" * 100_000, "text/plain", length=None)
    fetch = fetcher(make_test_settings, allow=LOOPBACK, url_fetch_max_bytes=10_000)
    error = await refused(fetch, web_site.url("/stream.txt"), tmp_path)
    assert isinstance(error, UrlTooLargeError)
    assert (tmp_path / "download.part").stat().st_size <= 10_000


@pytest.mark.parametrize("content_type", ["application/octet-stream", "application/x-msdownload", "video/mp4", None])
async def test_a_content_type_the_extraction_does_not_read_is_refused(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path, content_type: str | None
) -> None:
    web_site.pages["/file"] = Page(b"MZ\x90\x00", content_type)
    error = await refused(fetcher(make_test_settings, allow=LOOPBACK), web_site.url("/file"), tmp_path)
    assert isinstance(error, UrlContentTypeError)
    assert (error.code, error.status_code) == ("UNSUPPORTED_CONTENT", 415)
    assert (content_type or "no Content-Type") in error.detail()


async def test_an_error_status_is_an_upstream_failure(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    error = await refused(fetcher(make_test_settings, allow=LOOPBACK), web_site.url("/missing"), tmp_path)
    assert isinstance(error, UrlFetchFailedError)
    assert error.detail() == "The URL answered HTTP 404."


async def test_a_name_that_does_not_resolve_is_an_upstream_failure(
    make_test_settings: MakeSettings, tmp_path: Path
) -> None:
    async def no_such_host(host: str, port: int) -> Sequence[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    error = await refused(fetcher(make_test_settings, resolver=no_such_host), "https://nothing.invalid/", tmp_path)
    assert isinstance(error, UrlFetchFailedError)
    assert error.detail() == "The URL's host name does not resolve."


async def test_a_stalled_site_times_out_within_the_limit(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    web_site.pages["/slow"] = Page(HTML, stall=10)
    fetch = fetcher(make_test_settings, allow=LOOPBACK, url_fetch_timeout_seconds=0.5)
    started = time.monotonic()
    error = await refused(fetch, web_site.url("/slow"), tmp_path)
    assert time.monotonic() - started < 5
    assert isinstance(error, UrlFetchTimeoutError)
    assert (error.code, error.status_code) == ("URL_FETCH_TIMEOUT", 504)
    assert "URL_FETCH_TIMEOUT_SECONDS (0.5 s)" in error.detail()


def test_an_invalid_allow_list_names_the_variable(make_test_settings: MakeSettings) -> None:
    from shared_contract import ContractConfigError

    with pytest.raises(ContractConfigError, match=r"^URL_FETCH_ALLOW_NETWORKS"):
        make_test_settings(url_fetch_allow_networks="10.0.0.0/8, not-a-network")


async def test_with_fetching_off_no_url_is_reached(
    make_test_settings: MakeSettings, web_site: WebSite, tmp_path: Path
) -> None:
    off = fetcher(make_test_settings, allow=LOOPBACK, url_fetch_enabled=False)
    error = await refused(off, web_site.url("/docs/report"), tmp_path)
    assert isinstance(error, UrlNotAllowedError)
    assert "URL_FETCH_ENABLED=false" in error.detail()
    assert web_site.visits == []
