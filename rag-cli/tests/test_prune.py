"""``rag open-webui prune`` against a scripted Open WebUI (0.12.4's listing shapes, on 127.0.0.1) and a
real ingestion service on an embedded store: exactly the orphans go, and nothing on any doubt."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # the ingestion app below runs Haystack

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ingestion_service.main import create_app
from ingestion_service.runtime import ServiceHooks
from ingestion_service.settings import Settings
from rag_cli.__main__ import main
from rag_runtime.embedding import ContractEmbedder
from shared_contract import load_settings

from .conftest import INGESTION_KEY, serving, store_parent  # noqa: TID252

ADMIN_TOKEN = "sk-admin-0123456789"
USER_TOKEN = "sk-user-0123456789"
NOT_FOUND = {"detail": "We could not find what you're looking for :/"}


@pytest.fixture(scope="module")
def store_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="rag-cli-prune-", dir=store_parent()))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _settings(store_root: Path) -> Settings:
    values: dict[str, Any] = {
        "api_key": INGESTION_KEY,
        "qdrant_uri": None,
        "qdrant_path": store_root / "qdrant",
        "qdrant_index": f"prune_{uuid.uuid4().hex[:12]}",
        "scratch_dir": store_root / "scratch",
        "ingest_state_dir": store_root / "state",
        "originals_dir": store_root / "originals",
        "s3_endpoint_url": None,
    }
    return load_settings(Settings, **values)


@pytest.fixture(scope="module")
def embedder(store_root: Path) -> ContractEmbedder:
    shared = ContractEmbedder(_settings(store_root))
    shared.warm_up()
    return shared


@pytest.fixture
def ingestion(store_root: Path, embedder: ContractEmbedder) -> Iterator[str]:
    """A real ingestion service (its own collection) on a loopback port, ready."""
    app = create_app(_settings(store_root), hooks=ServiceHooks(embedder=embedder))
    with serving(app) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            for _ in range(600):
                if client.get("/health/ready").status_code == 200:
                    break
            else:
                pytest.fail("the ingestion service never became ready")
        yield url


def ingest(url: str, *, collection: str, file_id: str, user_id: str = "user-1") -> None:
    fields = {"file_id": file_id, "filename": f"{file_id}.md", "collection_name": collection, "user_id": user_id}
    text = f"# Notes {file_id}\n\nHerons nest in colonies near water; this note belongs to {collection}.\n"
    response = httpx.put(
        f"{url}/api/v1/ingest",
        data=fields,
        files={"file": (f"{file_id}.md", text.encode(), "text/markdown")},
        headers={"Authorization": f"Bearer {INGESTION_KEY}"},
        timeout=120,
    )
    assert response.status_code == 200, response.text


def tenants(url: str) -> set[str]:
    response = httpx.get(
        f"{url}/api/v1/collections",
        params={"include_all": "true"},
        headers={"Authorization": f"Bearer {INGESTION_KEY}"},
    )
    assert response.status_code == 200, response.text
    return {entry["name"] for entry in response.json()["collections"]}


@dataclass
class OpenWebUIScript:
    """What the scripted Open WebUI holds and how it misbehaves."""

    files: list[str]
    knowledge_bases: list[str]
    # Each knowledge base's files (GET /api/v1/knowledge/{id}/files).
    knowledge_base_files: dict[str, list[str]] = field(default_factory=dict[str, list[str]])
    # Leave these out of the listing while GET by id still finds them (BYPASS_ADMIN_ACCESS_CONTROL=false).
    unlisted: set[str] = field(default_factory=set[str])
    failing_listing: bool = False
    # Added to every page's total: items the pages never deliver (a listing that changes while read).
    missing_items: int = 0
    requests: list[str] = field(default_factory=list[str])


def _file(file_id: str) -> dict[str, Any]:
    # FileModelResponse as 0.12.4 sends it (content=false drops data.content).
    return {
        "id": file_id,
        "user_id": "u-1",
        "hash": "0" * 64,
        "filename": "report.pdf",
        "data": {"status": "completed"},
        "meta": {"name": "report.pdf", "content_type": "application/pdf", "size": 1234},
        "created_at": 1761350400,
        "updated_at": 1761350400,
    }


def _knowledge(knowledge_id: str) -> dict[str, Any]:
    # KnowledgeAccessResponse as 0.12.4 sends it.
    return {
        "id": knowledge_id,
        "user_id": "u-1",
        "name": "Handbook",
        "description": "",
        "meta": None,
        "access_grants": [],
        "created_at": 1761350400,
        "updated_at": 1761350400,
        "user": None,
        "file_count": 1,
        "write_access": True,
    }


def scripted_open_webui(script: OpenWebUIScript) -> Starlette:
    """``GET /api/v1/files/`` (50 a page in 0.12.4; 2 here, so paging runs), ``/api/v1/knowledge/`` (30 a
    page; 1 here), each by id, and the admin-only ``/api/v1/auths/admin/config``."""

    def authorised(request: Request) -> str | None:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        return token if token in {ADMIN_TOKEN, USER_TOKEN} else None

    def page_of(request: Request, ids: list[str], size: int, render: Any) -> JSONResponse:
        script.requests.append(str(request.url.path) + "?" + str(request.url.query))
        if authorised(request) is None:
            return JSONResponse({"detail": "Not authenticated"}, status_code=401)
        if script.failing_listing:
            return JSONResponse({"detail": "database is locked"}, status_code=500)
        listed = [item for item in ids if item not in script.unlisted]
        page = int(request.query_params.get("page", "1"))
        items = listed[(page - 1) * size : page * size]
        return JSONResponse({"items": [render(item) for item in items], "total": len(listed) + script.missing_items})

    async def admin_config(request: Request) -> JSONResponse:
        if authorised(request) != ADMIN_TOKEN:
            return JSONResponse({"detail": "You do not have permission to access this resource."}, status_code=401)
        return JSONResponse({"SHOW_ADMIN_DETAILS": True, "ENABLE_SIGNUP": False})

    async def files(request: Request) -> JSONResponse:
        return page_of(request, script.files, 2, _file)

    async def knowledge(request: Request) -> JSONResponse:
        return page_of(request, script.knowledge_bases, 1, _knowledge)

    async def file_by_id(request: Request) -> JSONResponse:
        file_id = request.path_params["id"]
        return JSONResponse(_file(file_id)) if file_id in script.files else JSONResponse(NOT_FOUND, status_code=404)

    async def knowledge_files(request: Request) -> JSONResponse:
        knowledge_id = request.path_params["id"]
        if knowledge_id not in script.knowledge_bases:
            return JSONResponse(NOT_FOUND, status_code=400)  # 0.12.4 answers 400 for an unknown one
        return page_of(request, script.knowledge_base_files.get(knowledge_id, []), 30, _file)

    async def knowledge_by_id(request: Request) -> JSONResponse:
        knowledge_id = request.path_params["id"]
        if knowledge_id in script.knowledge_bases:
            return JSONResponse({**_knowledge(knowledge_id), "files": []})
        return JSONResponse(NOT_FOUND, status_code=404)

    return Starlette(
        routes=[
            Route("/api/v1/auths/admin/config", admin_config),
            Route("/api/v1/files/", files),
            Route("/api/v1/files/{id}", file_by_id),
            Route("/api/v1/knowledge/", knowledge),
            Route("/api/v1/knowledge/{id}", knowledge_by_id),
            Route("/api/v1/knowledge/{id}/files", knowledge_files),
        ]
    )


@dataclass
class Estate:
    """Tenants seeded in the ingestion service, by what Open WebUI knows of them."""

    live_files: list[str]
    gone_files: list[str]
    live_kb: str
    gone_kb: str
    user_memory: str

    @property
    def kept(self) -> set[str]:
        return {f"file-{file_id}" for file_id in self.live_files} | {self.live_kb, "docs", self.user_memory}

    @property
    def orphans(self) -> set[str]:
        return {f"file-{file_id}" for file_id in self.gone_files} | {self.gone_kb}


@pytest.fixture
def estate(ingestion: str) -> Estate:
    ids = [str(uuid.uuid4()) for _ in range(8)]
    seeded = Estate(
        live_files=ids[0:3], gone_files=ids[3:5], live_kb=ids[5], gone_kb=ids[6], user_memory=f"user-memory-{ids[7]}"
    )
    for file_id in seeded.live_files + seeded.gone_files:
        ingest(ingestion, collection=f"file-{file_id}", file_id=file_id)
    ingest(ingestion, collection=seeded.live_kb, file_id=seeded.live_files[0])
    # A knowledge base whose files are gone too, and one whose file Open WebUI still has.
    ingest(ingestion, collection=seeded.gone_kb, file_id=seeded.gone_files[0])
    ingest(ingestion, collection=seeded.gone_kb, file_id=seeded.live_files[1])
    # Not Open WebUI's: a `rag ingest` knowledge base and a user's memories.
    ingest(ingestion, collection="docs", file_id=str(uuid.uuid4()))
    ingest(ingestion, collection=seeded.user_memory, file_id=str(uuid.uuid4()), user_id=ids[7])
    assert tenants(ingestion) == seeded.kept | seeded.orphans
    return seeded


def prune(ingestion: str, open_webui: str, *extra: str, token: str = ADMIN_TOKEN) -> int:
    argv = ["open-webui", "prune", "--url", open_webui, "--token", token, "--ingestion-url", ingestion, *extra]
    return main([*argv, "--ingestion-api-key", INGESTION_KEY])


def script_for(estate: Estate) -> OpenWebUIScript:
    return OpenWebUIScript(
        files=list(estate.live_files),
        knowledge_bases=[estate.live_kb],
        knowledge_base_files={estate.live_kb: [estate.live_files[0]]},
    )


def documents(url: str, collection: str) -> set[str]:
    response = httpx.get(
        f"{url}/api/v1/documents",
        params={"collection_name": collection},
        headers={"Authorization": f"Bearer {INGESTION_KEY}"},
    )
    assert response.status_code == 200, response.text
    return {document["file_id"] for document in response.json()["documents"]}


def test_prune_removes_the_documents_a_live_knowledge_base_no_longer_lists(
    ingestion: str, estate: Estate, capsys: pytest.CaptureFixture[str]
) -> None:
    # The fork sent nothing when live_files[2] left the knowledge base, nor when gone_files[1] was
    # deleted; a `rag sync` document (a uuid5 id) is not Open WebUI's and stays.
    synced = str(uuid.uuid5(uuid.NAMESPACE_URL, "https://wiki.example/page"))
    for file_id in (estate.live_files[2], estate.gone_files[1], synced):
        ingest(ingestion, collection=estate.live_kb, file_id=file_id)
    with serving(scripted_open_webui(script_for(estate))) as open_webui:
        assert prune(ingestion, open_webui, "--dry-run") == 0
        assert documents(ingestion, estate.live_kb) == {
            estate.live_files[0],
            estate.live_files[2],
            estate.gone_files[1],
            synced,
        }
        assert prune(ingestion, open_webui) == 0
    assert documents(ingestion, estate.live_kb) == {estate.live_files[0], synced}
    assert tenants(ingestion) == estate.kept
    out = capsys.readouterr().out
    assert "3 tenants and 2 documents would be removed" in out
    assert f"removed {estate.live_files[2]}" in out
    assert "3 tenants and 2 documents removed" in out


def test_prune_removes_exactly_the_orphans(ingestion: str, estate: Estate, capsys: pytest.CaptureFixture[str]) -> None:
    script = script_for(estate)
    with serving(scripted_open_webui(script)) as open_webui:
        assert prune(ingestion, open_webui) == 0
    assert tenants(ingestion) == estate.kept
    out = capsys.readouterr().out
    for name in estate.orphans:
        assert name in out
    assert "3 tenants and 0 documents removed" in out
    # Every page of the paged listings was read (3 files at 2 a page).
    assert any("page=2" in request for request in script.requests if request.startswith("/api/v1/files/"))


def test_dry_run_removes_nothing_and_says_what_it_would(
    ingestion: str, estate: Estate, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(scripted_open_webui(script_for(estate))) as open_webui:
        assert prune(ingestion, open_webui, "--dry-run") == 0
    assert tenants(ingestion) == estate.kept | estate.orphans
    out = capsys.readouterr().out
    assert "dry run" in out
    for name in estate.orphans:
        assert name in out
    assert "3 tenants and 0 documents would be removed" in out


def test_a_failed_listing_removes_nothing_and_exits_non_zero(
    ingestion: str, estate: Estate, capsys: pytest.CaptureFixture[str]
) -> None:
    script = script_for(estate)
    script.failing_listing = True
    with serving(scripted_open_webui(script)) as open_webui:
        assert prune(ingestion, open_webui) == 1
    assert tenants(ingestion) == estate.kept | estate.orphans
    out = capsys.readouterr().out
    assert "HTTP 500" in out
    assert "nothing was removed" in out


def test_a_listing_whose_pages_miss_items_removes_nothing(
    ingestion: str, estate: Estate, capsys: pytest.CaptureFixture[str]
) -> None:
    script = script_for(estate)
    script.missing_items = 1
    with serving(scripted_open_webui(script)) as open_webui:
        assert prune(ingestion, open_webui) == 1
    assert tenants(ingestion) == estate.kept | estate.orphans
    out = capsys.readouterr().out
    assert "came back partial 3 times (3 distinct ids for a total of 4)" in out
    assert "nothing was removed" in out


def test_a_partial_listing_removes_nothing(ingestion: str, estate: Estate, capsys: pytest.CaptureFixture[str]) -> None:
    # An admin without BYPASS_ADMIN_ACCESS_CONTROL is listed only some files, but reads any by id.
    script = script_for(estate)
    script.unlisted = {estate.live_files[2]}
    with serving(scripted_open_webui(script)) as open_webui:
        assert prune(ingestion, open_webui) == 1
    assert tenants(ingestion) == estate.kept | estate.orphans
    out = capsys.readouterr().out
    assert "listing is partial" in out
    assert "nothing was removed" in out


def test_a_token_that_is_not_an_admins_removes_nothing(
    ingestion: str, estate: Estate, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(scripted_open_webui(script_for(estate))) as open_webui:
        assert prune(ingestion, open_webui, token=USER_TOKEN) == 1
    assert tenants(ingestion) == estate.kept | estate.orphans
    assert "refused the token as an admin's" in capsys.readouterr().out


def test_without_an_open_webui_url_it_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPEN_WEBUI_URL", raising=False)
    assert main(["open-webui", "prune", "--token", ADMIN_TOKEN]) == 2
    assert "--url or OPEN_WEBUI_URL" in capsys.readouterr().err
