"""HTTP calls to an Open WebUI (0.12.4's API) that ``rag open-webui prune`` needs: which files and
knowledge bases it has, read with an admin's token.

A listing is only returned whole: ``GET /api/v1/files/`` (50 a page) and ``GET /api/v1/knowledge/``
(30 a page) are read page by page and every page's ``total`` must agree with the ids collected, else
the listing is read again, and after :data:`LISTING_ATTEMPTS` it is a :class:`OpenWebUIError`. Pages
are ordered by ``updated_at``, so a file changed while it is listed moves and another is skipped:
the totals catch that. An admin sees every file and knowledge base only while Open WebUI's
``BYPASS_ADMIN_ACCESS_CONTROL`` is true (its default); :meth:`OpenWebUI.has_file` and
:meth:`OpenWebUI.has_knowledge_base` ask for one id, which an admin reads whatever that setting says.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from rag_cli.config import Endpoint

LISTING_ATTEMPTS = 3


class OpenWebUIError(Exception):
    """Open WebUI could not be read, or answered something other than its API's shapes."""


class _Entry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str


class _Page(BaseModel):
    """``FileListResponse`` / ``KnowledgeAccessListResponse``: ``items`` and the ``total`` of all pages."""

    model_config = ConfigDict(extra="ignore")

    items: list[_Entry]
    total: int


class OpenWebUI:
    """One Open WebUI: its base URL and an admin's API key or session token as ``endpoint``."""

    def __init__(self, client: httpx.AsyncClient, endpoint: Endpoint) -> None:
        self._client = client
        self._url = endpoint.url
        self._headers = endpoint.headers

    async def _get(self, path: str, params: dict[str, str] | None = None) -> httpx.Response:
        try:
            return await self._client.get(f"{self._url}{path}", params=params, headers=self._headers)
        except httpx.HTTPError as exc:
            raise OpenWebUIError(f"GET {self._url}{path}: {type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _failure(response: httpx.Response) -> OpenWebUIError:
        return OpenWebUIError(f"GET {response.request.url}: HTTP {response.status_code}: {response.text[:200]}")

    async def check_admin(self) -> None:
        """The token is an admin's (``GET /api/v1/auths/admin/config`` answers only admins)."""
        response = await self._get("/api/v1/auths/admin/config")
        if response.status_code in {401, 403}:
            raise OpenWebUIError(
                f"Open WebUI refused the token as an admin's (HTTP {response.status_code}): "
                "give an admin's API key or session token"
            )
        if response.status_code != 200:
            raise self._failure(response)

    async def file_ids(self) -> set[str]:
        """Every file's id (``GET /api/v1/files/?content=false``, all pages)."""
        return await self._listing("/api/v1/files/", {"content": "false"})

    async def knowledge_base_ids(self) -> set[str]:
        """Every knowledge base's id (``GET /api/v1/knowledge/``, all pages)."""
        return await self._listing("/api/v1/knowledge/", {})

    async def knowledge_base_file_ids(self, knowledge_id: str) -> set[str]:
        """The ids of a knowledge base's files (``GET /api/v1/knowledge/{id}/files``, all pages)."""
        return await self._listing(f"/api/v1/knowledge/{quote(knowledge_id, safe='')}/files", {})

    async def has_file(self, file_id: str) -> bool:
        """Whether Open WebUI has the file (``GET /api/v1/files/{id}``: 404 when it has not)."""
        return await self._exists(f"/api/v1/files/{quote(file_id, safe='')}")

    async def has_knowledge_base(self, knowledge_id: str) -> bool:
        """Whether Open WebUI has the knowledge base (``GET /api/v1/knowledge/{id}``: 404 when it has not)."""
        return await self._exists(f"/api/v1/knowledge/{quote(knowledge_id, safe='')}")

    async def _exists(self, path: str) -> bool:
        response = await self._get(path)
        if response.status_code == 404:
            return False
        if response.status_code != 200:
            raise self._failure(response)
        return True

    async def _listing(self, path: str, params: dict[str, str]) -> set[str]:
        problem = ""
        for _ in range(LISTING_ATTEMPTS):
            ids, problem = await self._read_pages(path, params)
            if ids is not None:
                return ids
        raise OpenWebUIError(
            f"GET {self._url}{path} came back partial {LISTING_ATTEMPTS} times ({problem}); nothing can be "
            "taken as gone from Open WebUI"
        )

    async def _read_pages(self, path: str, params: dict[str, str]) -> tuple[set[str] | None, str]:
        """All pages once: the ids, or None and why they do not add up to the pages' ``total``."""
        ids: set[str] = set()
        total: int | None = None
        page_number = 1
        while True:
            page = await self._page(path, {**params, "page": str(page_number)})
            if total is None:
                total = page.total
            elif page.total != total:
                return None, f"total went from {total} to {page.total} while it was read"
            before = len(ids)
            ids.update(entry.id for entry in page.items)
            # An empty page, or one of ids already seen, ends it: the count below then says why.
            if len(ids) >= total or len(ids) == before:
                break
            page_number += 1
        if len(ids) != total:
            return None, f"{len(ids)} distinct ids for a total of {total}"
        return ids, ""

    async def _page(self, path: str, params: dict[str, str]) -> _Page:
        response = await self._get(path, params)
        if response.status_code != 200:
            raise self._failure(response)
        try:
            body: Any = response.json()
            return _Page.model_validate(body)
        except (ValueError, ValidationError) as exc:
            raise OpenWebUIError(
                f"GET {response.request.url}: not an Open WebUI listing ({type(exc).__name__}): {response.text[:200]}"
            ) from exc
