"""A website's pages: its sitemap (``robots.txt``'s ``Sitemap:`` lines, else ``/sitemap.xml``; sitemap
indexes followed), else a breadth-first crawl of its same-host links within a depth and a page limit.
``robots.txt`` is honoured for the fetcher's User-Agent. Every request goes through the UrlFetcher, so
its SSRF guard and limits hold for robots.txt and sitemaps too."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

import anyio.to_thread

from ingestion_service.adapters.url_fetcher import USER_AGENT, UrlFetcher
from ingestion_service.documents._safe_xml import BadXmlError, parse_xml
from ingestion_service.errors import IngestionError, SourceUnreadableError, UrlFetchFailedError

logger = logging.getLogger(__name__)

# Sitemap indexes nest; this many sitemap documents are read at most.
MAX_SITEMAPS = 50
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


@dataclass(frozen=True)
class FetchedText:
    """A fetched response read as text."""

    url: str
    media_type: str
    text: str


# url -> its text; raises the fetcher's typed errors.
FetchText = Callable[[str], Awaitable[FetchedText]]


def fetch_text_with(fetcher: UrlFetcher, directory: Path) -> FetchText:
    """A FetchText that fetches through ``fetcher`` into one file in ``directory``, read and then removed."""

    async def fetch(url: str) -> FetchedText:
        destination = directory / "crawl.part"
        try:
            fetched = await fetcher.fetch(url, destination)
            data = await anyio.to_thread.run_sync(destination.read_bytes)
        finally:
            await anyio.to_thread.run_sync(lambda: destination.unlink(missing_ok=True))
        return FetchedText(fetched.final_url, fetched.media_type, data.decode("utf-8", errors="replace"))

    return fetch


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def page_links(html: str) -> list[str]:
    """The ``<a href>`` targets of a page, in order."""
    parser = _Links()
    parser.feed(html)
    parser.close()
    return parser.hrefs


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc.lower()


def _normal(url: str) -> str:
    """Without its fragment (one page), with a path ("/" for none)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", parts.query, ""))


def _sitemap_locs(text: str) -> tuple[list[str], list[str]]:
    """(pages, nested sitemaps) of a sitemap or sitemap index; an unparsable one lists nothing."""
    try:
        root = parse_xml(text.encode("utf-8"))
    except BadXmlError as exc:  # a broken sitemap: the crawl falls back to following links
        logger.warning("a sitemap could not be parsed: %s", exc)
        return [], []
    locs = [element.text.strip() for element in root.iter() if element.tag.endswith("loc") and element.text]
    if root.tag.endswith("sitemapindex"):
        return [], locs
    return locs, []


class SiteCrawl:
    """One website's page listing: ``pages()`` answers the URLs, at most ``max_pages``."""

    def __init__(self, fetch: FetchText, root_url: str, *, max_pages: int, max_depth: int) -> None:
        self.fetch = fetch
        self.root_url = _normal(root_url)
        self.origin = _origin(self.root_url)
        self.max_pages = max_pages
        self.max_depth = max_depth
        self.robots = RobotFileParser()

    def allowed(self, url: str) -> bool:
        """Same scheme and host as the root, and not disallowed by robots.txt."""
        return _origin(url) == self.origin and self.robots.can_fetch(USER_AGENT, url)

    async def pages(self) -> list[str]:
        """The site's pages: from its sitemap when it has one, else from its links."""
        sitemaps = await self._read_robots()
        pages = await self._from_sitemaps(sitemaps)
        if pages:
            return pages
        return await self._crawl()

    async def _read_robots(self) -> list[str]:
        scheme, host = self.origin
        url = f"{scheme}://{host}/robots.txt"
        try:
            robots = await self.fetch(url)
        except UrlFetchFailedError:
            self.robots.parse([])  # no robots.txt (or it answered an error): everything is allowed
            return [f"{scheme}://{host}/sitemap.xml"]
        self.robots.parse(robots.text.splitlines())
        return list(self.robots.site_maps() or [f"{scheme}://{host}/sitemap.xml"])

    async def _from_sitemaps(self, sitemaps: list[str]) -> list[str]:
        queue = deque(sitemaps)
        read: set[str] = set()
        pages: dict[str, None] = {}
        while queue and len(read) < MAX_SITEMAPS and len(pages) < self.max_pages:
            sitemap = queue.popleft()
            if sitemap in read or _origin(sitemap) != self.origin:
                continue
            read.add(sitemap)
            try:
                fetched = await self.fetch(sitemap)
            except IngestionError as exc:
                logger.info("sitemap %s not read (%s); the site's links are followed instead", sitemap, exc.code)
                continue
            found, nested = _sitemap_locs(fetched.text)
            queue.extend(nested)
            for page in found:
                normal = _normal(page)
                if self.allowed(normal) and len(pages) < self.max_pages:
                    pages[normal] = None
        return list(pages)

    async def _crawl(self) -> list[str]:
        if not self.allowed(self.root_url):
            raise SourceUnreadableError("The site's robots.txt disallows its own root page for this service.")
        pages: list[str] = []
        seen = {self.root_url}
        queue: deque[tuple[str, int]] = deque([(self.root_url, 0)])
        while queue and len(pages) < self.max_pages:
            url, depth = queue.popleft()
            try:
                fetched = await self.fetch(url)
            except IngestionError as exc:
                if url == self.root_url:
                    raise  # the site itself is unreachable: the source failed, nothing is removed
                logger.info("page %s not crawled: %s", url, exc.code)
                continue
            pages.append(url)
            if depth >= self.max_depth or fetched.media_type not in _HTML_TYPES:
                continue
            for href in page_links(fetched.text):
                link = _normal(urljoin(fetched.url, href))
                if link not in seen and urlsplit(link).scheme in ("http", "https") and self.allowed(link):
                    seen.add(link)
                    queue.append((link, depth + 1))
        return pages
