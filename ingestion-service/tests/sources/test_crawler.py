"""SiteCrawl against a real site on 127.0.0.1 (allow-listed), through the real UrlFetcher."""

from __future__ import annotations

from pathlib import Path

import anyio

from ingestion_service.adapters.url_fetcher import UrlFetcher
from ingestion_service.sources.crawler import SiteCrawl, fetch_text_with

from ..conftest import MakeSettings  # noqa: TID252
from ..web_site import Page, WebSite  # noqa: TID252


def _html(*links: str) -> Page:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return Page(f"<html><body><p>text</p>{anchors}</body></html>".encode())


def _pages(
    site: WebSite, settings: MakeSettings, tmp_path: Path, *, max_pages: int = 50, max_depth: int = 5
) -> list[str]:
    fetcher = UrlFetcher(settings(url_fetch_allow_networks="127.0.0.1/32"))
    crawl = SiteCrawl(fetch_text_with(fetcher, tmp_path), site.url("/"), max_pages=max_pages, max_depth=max_depth)
    return anyio.run(crawl.pages)


def test_the_sitemap_lists_the_pages(web_site: WebSite, make_test_settings: MakeSettings, tmp_path: Path) -> None:
    web_site.pages["/sitemap.xml"] = Page(
        (
            '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<url><loc>{web_site.url('/a')}</loc></url><url><loc>{web_site.url('/b')}</loc></url></urlset>"
        ).encode(),
        "application/xml",
    )
    web_site.pages["/"] = _html("/not-in-sitemap")
    assert _pages(web_site, make_test_settings, tmp_path) == [web_site.url("/a"), web_site.url("/b")]


def test_a_sitemap_index_named_by_robots_txt_is_followed(
    web_site: WebSite, make_test_settings: MakeSettings, tmp_path: Path
) -> None:
    web_site.pages["/robots.txt"] = Page(f"Sitemap: {web_site.url('/maps/index.xml')}\n".encode(), "text/plain")
    web_site.pages["/maps/index.xml"] = Page(
        f"<sitemapindex><sitemap><loc>{web_site.url('/maps/one.xml')}</loc></sitemap></sitemapindex>".encode(),
        "application/xml",
    )
    web_site.pages["/maps/one.xml"] = Page(
        f"<urlset><url><loc>{web_site.url('/deep/page')}</loc></url></urlset>".encode(), "application/xml"
    )
    assert _pages(web_site, make_test_settings, tmp_path) == [web_site.url("/deep/page")]


def test_without_a_sitemap_links_are_followed_to_the_depth_limit(
    web_site: WebSite, make_test_settings: MakeSettings, tmp_path: Path
) -> None:
    web_site.pages["/"] = _html("/one")
    web_site.pages["/one"] = _html("/two")
    web_site.pages["/two"] = _html("/three")
    web_site.pages["/three"] = _html()
    assert _pages(web_site, make_test_settings, tmp_path, max_depth=2) == [
        web_site.url("/"),
        web_site.url("/one"),
        web_site.url("/two"),
    ]


def test_the_page_limit_stops_the_crawl(web_site: WebSite, make_test_settings: MakeSettings, tmp_path: Path) -> None:
    web_site.pages["/"] = _html("/a", "/b", "/c")
    for path in ("/a", "/b", "/c"):
        web_site.pages[path] = _html()
    assert _pages(web_site, make_test_settings, tmp_path, max_pages=2) == [web_site.url("/"), web_site.url("/a")]


def test_robots_txt_disallowed_pages_are_neither_fetched_nor_listed(
    web_site: WebSite, make_test_settings: MakeSettings, tmp_path: Path
) -> None:
    web_site.pages["/robots.txt"] = Page(b"User-agent: *\nDisallow: /private/\n", "text/plain")
    web_site.pages["/"] = _html("/private/secret", "/public")
    web_site.pages["/private/secret"] = _html()
    web_site.pages["/public"] = _html()
    assert _pages(web_site, make_test_settings, tmp_path) == [web_site.url("/"), web_site.url("/public")]
    assert all(not visit.path.startswith("/private/") for visit in web_site.visits)


def test_links_to_other_hosts_are_ignored(web_site: WebSite, make_test_settings: MakeSettings, tmp_path: Path) -> None:
    other_host = web_site.url("/elsewhere", host="localhost")
    web_site.pages["/"] = _html(other_host, "https://example.com/", "mailto:someone@example.com", "/here#part")
    web_site.pages["/here"] = _html()
    web_site.pages["/elsewhere"] = _html()
    assert _pages(web_site, make_test_settings, tmp_path) == [web_site.url("/"), web_site.url("/here")]
    assert all(visit.path != "/elsewhere" for visit in web_site.visits)
