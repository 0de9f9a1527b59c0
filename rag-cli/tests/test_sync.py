"""``rag sync``: the plan as a pure function, and the command against a fake ingestion service."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from moto import mock_aws
from rich.console import Console
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from ingestion_service.api.models import DeleteResponse, DocumentView, ExtractionInfo, IngestResponse
from rag_cli.__main__ import main
from rag_cli.client import file_id_for
from rag_cli.config import Endpoint
from rag_cli.sync.listing import folder_files
from rag_cli.sync.plan import (
    FolderSource,
    S3Source,
    SourceEntry,
    SourceError,
    SyncOptions,
    parse_source,
    plan_sync,
    sync_file_id,
)
from rag_cli.sync.watch import run_sync, watch_source, watch_until_signalled

from .conftest import document_row, document_view, error_reply, serving  # noqa: TID252

KEY = "k" * 40
ROOT = "file:///data/docs"
OTHER_ROOT = "file:///data/elsewhere"


def console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=200, force_terminal=False), buffer


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stored(root: str, path: str, content_hash: str | None = None, **extra: Any) -> DocumentView:
    return document_view(
        sync_file_id(root, path),
        name=path.rsplit("/", 1)[-1],
        content_hash=content_hash,
        attributes={"sync_source": root, "sync_path": path},
        **extra,
    )


# --- planning -----------------------------------------------------------------------------------


def test_plan_sorts_files_into_new_changed_unchanged_and_removed() -> None:
    local = [
        SourceEntry("a.md", content_hash=sha(b"a")),
        SourceEntry("sub/b.txt", content_hash=sha(b"b2")),
        SourceEntry("c.pdf", content_hash=sha(b"c")),
    ]
    remote = [
        stored(ROOT, "a.md", sha(b"a")),
        stored(ROOT, "sub/b.txt", sha(b"b1")),
        stored(ROOT, "gone.docx", sha(b"g")),
    ]
    plan = plan_sync(local, remote, ROOT)
    assert [entry.relative_path for entry in plan.added] == ["c.pdf"]
    assert [entry.relative_path for entry in plan.changed] == ["sub/b.txt"]
    assert [entry.relative_path for entry in plan.unchanged] == ["a.md"]
    assert [document.file_id for document in plan.removed] == [sync_file_id(ROOT, "gone.docx")]
    assert plan.failed == ()


def test_plan_never_removes_documents_of_other_sources() -> None:
    upload = document_view("open-webui-upload", name="notes.pdf", content_hash=sha(b"n"))
    other_folder = stored(OTHER_ROOT, "a.md", sha(b"a"))
    labelled = document_view("labelled", attributes={"department": "legal"})
    plan = plan_sync([], [upload, other_folder, labelled, stored(ROOT, "mine.md", sha(b"m"))], ROOT)
    assert [document.file_id for document in plan.removed] == [sync_file_id(ROOT, "mine.md")]


def test_plan_keeps_unreadable_files_out_of_removed() -> None:
    remote = [stored(ROOT, "locked.pdf", sha(b"x"))]
    plan = plan_sync([SourceEntry("locked.pdf", error="cannot read file: denied")], remote, ROOT)
    assert [entry.relative_path for entry in plan.failed] == ["locked.pdf"]
    assert plan.removed == ()
    assert plan.changed == ()


def test_plan_resends_a_same_id_document_without_this_roots_marks() -> None:
    # What `rag ingest` left behind: same file_id and bytes, but no sync attributes yet.
    adopted = document_view(sync_file_id(ROOT, "a.md"), content_hash=sha(b"a"))
    plan = plan_sync([SourceEntry("a.md", content_hash=sha(b"a"))], [adopted], ROOT)
    assert [entry.relative_path for entry in plan.changed] == ["a.md"]


def test_plan_force_resends_unchanged_files() -> None:
    plan = plan_sync([SourceEntry("a.md", content_hash=sha(b"a"))], [stored(ROOT, "a.md", sha(b"a"))], ROOT, force=True)
    assert plan.unchanged == ()
    assert [entry.relative_path for entry in plan.changed] == ["a.md"]


def test_plan_compares_s3_objects_by_key_and_etag() -> None:
    root = "s3://bucket/docs"
    local = [
        SourceEntry("same.pdf", s3_key="docs/same.pdf", s3_etag='"e1"'),
        SourceEntry("edited.pdf", s3_key="docs/edited.pdf", s3_etag='"e3"'),
        SourceEntry("moved.pdf", s3_key="docs/moved.pdf", s3_etag='"e4"'),
    ]
    remote = [
        stored(root, "same.pdf", s3_key="docs/same.pdf", s3_etag="e1"),  # stored unquoted: still equal
        stored(root, "edited.pdf", s3_key="docs/edited.pdf", s3_etag='"e2"'),
        stored(root, "moved.pdf", s3_key="elsewhere/moved.pdf", s3_etag='"e4"'),
    ]
    plan = plan_sync(local, remote, root)
    assert [entry.relative_path for entry in plan.unchanged] == ["same.pdf"]
    assert [entry.relative_path for entry in plan.changed] == ["edited.pdf", "moved.pdf"]


def test_file_ids_follow_the_root_and_match_rag_ingest_for_plain_paths(tmp_path: Path) -> None:
    root = tmp_path.resolve().as_uri()
    assert sync_file_id(root, "sub/a.md") == sync_file_id(root + "/", "sub/a.md")
    assert sync_file_id(root, "sub/a.md") == file_id_for(tmp_path / "sub" / "a.md")
    assert sync_file_id(root, "a.md") != sync_file_id("s3://bucket/prefix", "a.md")


def test_parse_source_normalises_roots(tmp_path: Path) -> None:
    assert parse_source("s3://bucket/some/prefix/") == S3Source("bucket", "some/prefix")
    assert parse_source("s3://bucket/some/prefix/").uri == "s3://bucket/some/prefix"
    assert parse_source("s3://bucket").uri == "s3://bucket"
    assert parse_source(str(tmp_path) + "/") == FolderSource(tmp_path.resolve())
    assert parse_source(str(tmp_path)).uri == tmp_path.resolve().as_uri()
    (tmp_path / "file.txt").write_text("x")
    for bad in ("s3://", str(tmp_path / "missing"), str(tmp_path / "file.txt")):
        with pytest.raises(SourceError):
            parse_source(bad)


def test_folder_files_skips_hidden_files_and_folders(tmp_path: Path) -> None:
    for name in ("b.txt", "sub/a.md", ".hidden", ".git/config", "sub/.cache/x", "sub/.draft.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    assert folder_files(tmp_path) == ["b.txt", "sub/a.md"]
    assert folder_files(tmp_path, {"sub"}) == ["sub/a.md"]


def test_folder_files_keeps_links_that_lead_nowhere(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "to-folder").symlink_to(tmp_path / "folder")
    (tmp_path / "dangling.md").symlink_to(tmp_path / "missing.md")
    (tmp_path / "loop.md").symlink_to(tmp_path / "loop.md")
    assert folder_files(tmp_path) == ["dangling.md", "loop.md"]
    assert folder_files(tmp_path, {"dangling.md", "loop.md"}) == ["dangling.md", "loop.md"]


# --- a fake ingestion service speaking the documented contract -----------------------------------


@dataclass
class FakeIngestion:
    """Ingest (multipart and S3 JSON), paged listing, delete; remembers every request it got."""

    page_size: int = 2
    fail_delete: set[str] = field(default_factory=lambda: set[str]())
    documents: dict[tuple[str, str], dict[str, Any]] = field(
        default_factory=lambda: dict[tuple[str, str], dict[str, Any]]()
    )
    ingests: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())
    deletes: list[str] = field(default_factory=lambda: list[str]())
    listings: int = 0

    def transport(self) -> httpx.ASGITransport:
        routes = [
            Route("/api/v1/ingest", self.ingest, methods=["PUT"]),
            Route("/api/v1/documents", self.list, methods=["GET"]),
            Route("/api/v1/documents/{file_id}", self.delete, methods=["DELETE"]),
        ]
        return httpx.ASGITransport(app=Starlette(routes=routes))

    def names(self, collection: str) -> dict[str, dict[str, Any]]:
        return {doc["name"]: doc for (kb, _), doc in self.documents.items() if kb == collection}

    async def ingest(self, request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return error_reply(401, "UNAUTHORIZED", "Missing or wrong API key.")
        s3: dict[str, Any] = {}
        if request.headers.get("content-type", "").startswith("application/json"):
            fields: dict[str, Any] = await request.json()
            client = boto3.client("s3", region_name="us-east-1")
            head = client.head_object(Bucket=fields["s3_bucket"], Key=fields["s3_key"])
            content = client.get_object(Bucket=fields["s3_bucket"], Key=fields["s3_key"])["Body"].read()
            s3 = {"s3_bucket": fields["s3_bucket"], "s3_key": fields["s3_key"], "s3_etag": head["ETag"]}
            force, attributes = bool(fields.get("force")), fields.get("attributes")
        else:
            form = await request.form()
            upload = form["file"]
            assert not isinstance(upload, str)
            content = await upload.read()
            fields = {key: value for key, value in form.items() if key != "file"}
            force = fields.get("force") == "true"
            attributes = json.loads(fields["attributes"]) if "attributes" in fields else None
        self.ingests.append({**fields, "bytes": content})
        if b"broken" in content:
            return error_reply(500, "EXTRACTION_FAILED", "Document extraction failed.")
        slot = (fields["collection_name"], fields["file_id"])
        previous = self.documents.get(slot)
        unchanged = previous is not None and previous["content_hash"] == sha(content) and not force
        self.documents[slot] = document_row(
            fields["file_id"],
            name=fields["filename"],
            collection_name=fields["collection_name"],
            content_hash=sha(content),
            chunks=len(content),
            attributes=attributes or {},
            **s3,
        )
        reply = IngestResponse(
            collection_name=fields["collection_name"],
            chunks_count=len(content),
            unchanged=unchanged,
            content_hash=sha(content),
            extraction=ExtractionInfo(engine="fake"),
        )
        return JSONResponse(reply.model_dump(mode="json", exclude_none=True))

    async def list(self, request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return error_reply(401, "UNAUTHORIZED", "Missing or wrong API key.")
        self.listings += 1
        kb = request.query_params["collection_name"]
        rows = sorted((doc for (name, _), doc in self.documents.items() if name == kb), key=lambda doc: doc["file_id"])
        start = int(request.query_params.get("offset") or 0)
        size = min(self.page_size, int(request.query_params["limit"]))
        end = start + size
        return JSONResponse(
            {"documents": rows[start:end], "total": len(rows), "next_offset": str(end) if end < len(rows) else None}
        )

    async def delete(self, request: Request) -> JSONResponse:
        file_id, kb = request.path_params["file_id"], request.query_params["collection_name"]
        self.deletes.append(file_id)
        if file_id in self.fail_delete:
            return error_reply(503, "QDRANT_UNAVAILABLE", "Qdrant is unreachable or failed.")
        removed = self.documents.pop((kb, file_id), None)
        reply = DeleteResponse(file_id=file_id, collection_name=kb, chunks_deleted=removed["chunks"] if removed else 0)
        return JSONResponse(reply.model_dump(mode="json", exclude_none=True))


def sync(fake: FakeIngestion, source: str, *, key: str = KEY, **options: Any) -> tuple[int, str]:
    out, buffer = console()
    code = run_sync(
        Endpoint("http://ingestion", key),
        source,
        SyncOptions(collection=options.pop("collection", "kb"), **options),
        console=out,
        transport=fake.transport(),
    )
    return code, buffer.getvalue()


def summary(text: str) -> str:
    """The plain summary line the command prints last."""
    return text.strip().splitlines()[-1]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "a.md").write_text("# Alpha\n")
    (root / "sub" / "b.txt").write_text("bravo")
    (root / "c.csv").write_text("x,y\n1,2\n")
    (root / ".hidden.md").write_text("never synced")
    return root


# --- the command ----------------------------------------------------------------------------------


def test_sync_adds_then_skips_unchanged_files_without_uploading(folder: Path) -> None:
    fake = FakeIngestion()
    code, text = sync(fake, str(folder))
    assert code == 0, text
    assert summary(text) == f"synced {folder.resolve().as_uri()}: 3 added, 0 changed, 0 unchanged, 0 removed, 0 failed"
    root = folder.resolve().as_uri()
    by_name = {item["filename"]: item for item in fake.ingests}
    assert sorted(by_name) == ["a.md", "b.txt", "c.csv"]
    assert by_name["b.txt"] == {
        "file_id": sync_file_id(root, "sub/b.txt"),
        "filename": "b.txt",
        "collection_name": "kb",
        "collection_type": "file",
        "user_id": "rag-cli",
        "overwrite": "true",
        "force": "false",
        "attributes": json.dumps({"sync_source": root, "sync_path": "sub/b.txt"}),
        "path": "sub/b.txt",
        "bytes": b"bravo",
    }
    assert "Sync summary" in text
    assert "sub/b.txt" in text

    fake.ingests.clear()
    code, text = sync(fake, str(folder))
    assert code == 0, text
    assert fake.ingests == []  # nothing uploaded, let alone embedded
    assert summary(text).endswith("0 added, 0 changed, 3 unchanged, 0 removed, 0 failed")
    assert "Files" not in text  # no per-file table when nothing happened


def test_sync_changes_removes_and_adds_and_leaves_other_documents_alone(folder: Path, tmp_path: Path) -> None:
    fake = FakeIngestion()
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.md").write_text("someone else's alpha")
    assert sync(fake, str(other))[0] == 0
    fake.documents[("kb", "open-webui-upload")] = document_row(
        "open-webui-upload", name="upload.pdf", content_hash=sha(b"u"), chunks=3
    )
    assert sync(fake, str(folder))[0] == 0

    (folder / "a.md").write_text("# Alpha, edited\n")
    (folder / "c.csv").unlink()
    (folder / "sub" / "new.md").write_text("new")
    fake.ingests.clear()
    code, text = sync(fake, str(folder))
    assert code == 0, text
    assert summary(text).endswith("1 added, 1 changed, 1 unchanged, 1 removed, 0 failed")
    assert sorted(item["filename"] for item in fake.ingests) == ["a.md", "new.md"]
    assert fake.deletes == [sync_file_id(folder.resolve().as_uri(), "c.csv")]
    names = fake.names("kb")
    assert names["a.md"]["content_hash"] == sha(b"# Alpha, edited\n")
    assert "c.csv" not in names
    # The other folder's document and the Open WebUI upload are still there.
    assert sorted(doc["file_id"] for doc in fake.documents.values()) == sorted(
        [
            "open-webui-upload",
            sync_file_id(other.resolve().as_uri(), "a.md"),
            *(sync_file_id(folder.resolve().as_uri(), path) for path in ("a.md", "sub/b.txt", "sub/new.md")),
        ]
    )
    for line in ("added", "changed", "removed"):
        assert line in text


def test_sync_reports_each_failure_and_exits_1(folder: Path) -> None:
    fake = FakeIngestion()
    assert sync(fake, str(folder))[0] == 0
    (folder / "broken.md").write_text("broken bytes")
    (folder / "a.md").unlink()
    fake.fail_delete.add(sync_file_id(folder.resolve().as_uri(), "a.md"))
    (folder / "ok.md").write_text("fine")
    code, text = sync(fake, str(folder))
    assert code == 1
    assert summary(text).endswith("1 added, 0 changed, 2 unchanged, 0 removed, 2 failed")
    assert "HTTP 500 EXTRACTION_FAILED: Document extraction failed." in text
    assert "HTTP 503 QDRANT_UNAVAILABLE: Qdrant is unreachable or failed." in text
    assert "failed (add)" in text
    assert "failed (remove)" in text
    assert "ok.md" in fake.names("kb")


def test_a_link_that_leads_nowhere_is_a_read_failure_not_a_removal(folder: Path, tmp_path: Path) -> None:
    fake = FakeIngestion()
    assert sync(fake, str(folder))[0] == 0
    (folder / "a.md").unlink()
    (folder / "a.md").symlink_to(tmp_path / "unmounted" / "a.md")
    fake.ingests.clear()
    code, text = sync(fake, str(folder))
    assert code == 1
    assert summary(text).endswith("0 added, 0 changed, 2 unchanged, 0 removed, 1 failed")
    assert "failed (read)" in text
    assert "cannot read file" in text
    assert fake.deletes == []
    assert "a.md" in fake.names("kb")


def test_dry_run_prints_the_plan_and_changes_nothing(folder: Path) -> None:
    fake = FakeIngestion()
    assert sync(fake, str(folder))[0] == 0
    (folder / "a.md").write_text("edited")
    (folder / "c.csv").unlink()
    (folder / "d.md").write_text("new")
    before = json.dumps(sorted(fake.documents.values(), key=str))
    fake.ingests.clear()
    code, text = sync(fake, str(folder), dry_run=True)
    assert code == 0, text
    assert fake.ingests == []
    assert fake.deletes == []
    assert json.dumps(sorted(fake.documents.values(), key=str)) == before
    assert "dry run: nothing changed" in text
    assert "to remove" in text
    assert summary(text) == f"planned {folder.resolve().as_uri()}: 1 added, 1 changed, 1 unchanged, 1 removed, 0 failed"


def test_force_resends_everything_with_force_true(folder: Path) -> None:
    fake = FakeIngestion()
    assert sync(fake, str(folder))[0] == 0
    fake.ingests.clear()
    code, text = sync(fake, str(folder), force=True)
    assert code == 0, text
    assert sorted(item["force"] for item in fake.ingests) == ["true", "true", "true"]
    assert summary(text).endswith("0 added, 3 changed, 0 unchanged, 0 removed, 0 failed")


def test_a_file_the_service_already_holds_counts_as_unchanged_and_gets_marked(folder: Path) -> None:
    fake = FakeIngestion()
    # `rag ingest` of the same folder: same file ids and bytes, no sync marks.
    for path in (folder / "a.md", folder / "sub" / "b.txt", folder / "c.csv"):
        fake.documents[("kb", file_id_for(path))] = document_row(
            file_id_for(path), name=path.name, content_hash=sha(path.read_bytes())
        )
    code, text = sync(fake, str(folder))
    assert code == 0, text
    assert summary(text).endswith("0 added, 0 changed, 3 unchanged, 0 removed, 0 failed")
    assert len(fake.ingests) == 3  # sent once to get the marks; the service re-embedded nothing
    fake.ingests.clear()
    assert sync(fake, str(folder))[0] == 0
    assert fake.ingests == []


def test_a_listing_the_service_refuses_stops_before_any_change(folder: Path) -> None:
    fake = FakeIngestion()
    code, text = sync(fake, str(folder), key="wrong")
    assert code == 1
    assert "HTTP 401" in text
    assert fake.ingests == []


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", str(tmp_path / "missing"), "--collection", "kb"]) == 2
    assert "no such folder" in capsys.readouterr().out
    assert main(["sync", str(tmp_path), "--collection", "kb", "--concurrency", "0"]) == 2
    assert main(["sync", str(tmp_path), "--collection", "kb", "--watch", "--dry-run"]) == 2
    assert "do not go together" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["sync", str(tmp_path)])  # --collection is required
    assert exited.value.code == 2


# --- S3 (moto in-process) -------------------------------------------------------------------------


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, bytes], None]]:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "S3_ENDPOINT_URL", "S3_ACCESS_KEY_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="docs-bucket")

        def put(key: str, data: bytes) -> None:
            client.put_object(Bucket="docs-bucket", Key=key, Body=data)

        yield put


def test_s3_prefix_sync_skips_unchanged_objects_by_etag(bucket: Callable[[str, bytes], None]) -> None:
    bucket("team/a.md", b"alpha")
    bucket("team/sub/b.txt", b"bravo")
    bucket("team/sub/", b"")  # a folder marker
    bucket("team/.DS_Store", b"junk")
    bucket("teammates/x.md", b"not under the prefix")
    fake = FakeIngestion()
    code, text = sync(fake, "s3://docs-bucket/team/")
    assert code == 0, text
    assert summary(text) == "synced s3://docs-bucket/team: 2 added, 0 changed, 0 unchanged, 0 removed, 0 failed"
    sent = {item["s3_key"]: item for item in fake.ingests}
    assert sorted(sent) == ["team/a.md", "team/sub/b.txt"]
    assert sent["team/sub/b.txt"]["filename"] == "b.txt"
    assert sent["team/sub/b.txt"]["file_id"] == sync_file_id("s3://docs-bucket/team", "sub/b.txt")
    assert sent["team/sub/b.txt"]["attributes"] == {"sync_source": "s3://docs-bucket/team", "sync_path": "sub/b.txt"}
    assert sent["team/sub/b.txt"]["force"] is False

    fake.ingests.clear()
    code, text = sync(fake, "s3://docs-bucket/team")
    assert code == 0, text
    assert fake.ingests == []
    assert summary(text).endswith("0 added, 0 changed, 2 unchanged, 0 removed, 0 failed")

    bucket("team/a.md", b"alpha, edited")
    boto3.client("s3", region_name="us-east-1").delete_object(Bucket="docs-bucket", Key="team/sub/b.txt")
    code, text = sync(fake, "s3://docs-bucket/team")
    assert code == 0, text
    assert summary(text).endswith("0 added, 1 changed, 0 unchanged, 1 removed, 0 failed")
    assert sorted(doc["s3_key"] for doc in fake.documents.values()) == ["team/a.md"]


def test_s3_listing_errors_abort_the_sync(bucket: Callable[[str, bytes], None]) -> None:
    fake = FakeIngestion()
    code, text = sync(fake, "s3://no-such-bucket/x")
    assert code == 1
    assert "NoSuchBucket" in text
    assert fake.ingests == []


def test_an_endpoint_that_is_not_s3_stops_before_any_change(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")

    async def page(_: Request) -> HTMLResponse:
        return HTMLResponse("<html><body>Open WebUI</body></html>")

    fake = FakeIngestion()
    # Synced from the prefix before: an empty listing would plan its removal.
    file_id = sync_file_id("s3://docs-bucket/team", "a.md")
    fake.documents[("kb", file_id)] = document_row(
        file_id, name="a.md", attributes={"sync_source": "s3://docs-bucket/team", "sync_path": "a.md"}
    )
    with serving(Starlette(routes=[Route("/{path:path}", page)])) as url:
        code, text = sync(fake, "s3://docs-bucket/team", dry_run=True, s3_endpoint_url=url)
    assert code == 1
    assert "cannot list s3://docs-bucket/team: the endpoint did not answer with an S3 object listing" in text
    assert "to remove" not in text


def test_a_malformed_s3_endpoint_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    assert main(["sync", "s3://docs-bucket/team", "--collection", "kb", "--s3-endpoint-url", "not a url"]) == 2
    assert "rag sync: --s3-endpoint-url 'not a url' is not a valid endpoint URL" in capsys.readouterr().out
    monkeypatch.setenv("S3_ENDPOINT_URL", "minio:9000")
    assert main(["sync", "s3://docs-bucket/team", "--collection", "kb"]) == 2
    assert "rag sync: S3_ENDPOINT_URL 'minio:9000' is not a valid endpoint URL" in capsys.readouterr().out


# --- --watch --------------------------------------------------------------------------------------


@dataclass
class FolderWatch:
    """``watch_source`` on a folder, running in the test's event loop (quiet period 200 ms)."""

    task: asyncio.Task[None]
    stop: asyncio.Event
    buffer: io.StringIO

    @classmethod
    def start(cls, folder: Path, fake: FakeIngestion) -> FolderWatch:
        out, buffer = console()
        stop = asyncio.Event()
        task = asyncio.create_task(
            watch_source(
                FolderSource(folder.resolve()),
                Endpoint("http://ingestion", KEY),
                SyncOptions(collection="kb"),
                console=out,
                debounce_ms=200,
                stop=stop,
                transport=fake.transport(),
            )
        )
        return cls(task, stop, buffer)

    async def until(self, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 20
        while not condition():
            assert not self.task.done(), self.buffer.getvalue()
            assert time.monotonic() < deadline, self.buffer.getvalue()
            await asyncio.sleep(0.05)

    async def finish(self) -> str:
        """Stop the watch; what it printed."""
        self.stop.set()
        await asyncio.wait_for(self.task, timeout=10)
        return self.buffer.getvalue()


def test_watch_syncs_what_changed_after_a_quiet_period(folder: Path) -> None:
    fake = FakeIngestion()
    root = folder.resolve().as_uri()

    async def scenario() -> str:
        watch = FolderWatch.start(folder, fake)
        await watch.until(lambda: "watching" in watch.buffer.getvalue())
        assert len(fake.names("kb")) == 3
        fake.ingests.clear()
        (folder / "sub" / "b.txt").unlink()
        (folder / "d.md").write_text("delta")
        (folder / ".swap").write_text("hidden: ignored")
        await watch.until(lambda: "d.md" in fake.names("kb") and "b.txt" not in fake.names("kb"))
        # Only the paths that changed were looked at again.
        assert [item["filename"] for item in fake.ingests] == ["d.md"]
        return await watch.finish()

    printed = asyncio.run(scenario())
    assert sync_file_id(root, "d.md") in {doc["file_id"] for doc in fake.documents.values()}
    assert "1 added, 0 changed, 0 unchanged, 1 removed, 0 failed" in printed


@pytest.mark.parametrize("wait_for_it", [False, True], ids=["made-again-at-once", "made-again-later"])
def test_a_folder_removed_and_made_again_is_watched_afresh(folder: Path, wait_for_it: bool) -> None:
    # Its watcher followed the removed folder's inode: files in the new one were never synced.
    fake = FakeIngestion()

    async def scenario() -> None:
        watch = FolderWatch.start(folder, fake)
        await watch.until(lambda: "watching" in watch.buffer.getvalue())
        assert len(fake.names("kb")) == 3
        shutil.rmtree(folder)
        if wait_for_it:
            await watch.until(lambda: "is not a folder now; waiting for it" in watch.buffer.getvalue())
            # Nothing is synced while it is gone: a missing folder is not an empty one.
            assert len(fake.names("kb")) == 3
        folder.mkdir()
        (folder / "new.md").write_text("written into the new folder")
        await watch.until(lambda: set(fake.names("kb")) == {"new.md"})
        # And the new folder is followed in its turn.
        (folder / "later.md").write_text("written later")
        await watch.until(lambda: set(fake.names("kb")) == {"new.md", "later.md"})
        await watch.finish()

    asyncio.run(scenario())


@dataclass
class WritingIngestion(FakeIngestion):
    """Writes a new file into the watched folder while the first full sync uploads (after it listed)."""

    folder: Path | None = None

    async def ingest(self, request: Request) -> JSONResponse:
        if self.folder is not None and not (self.folder / "late.md").exists():
            (self.folder / "late.md").write_text("written during the first sync")
        return await super().ingest(request)


def test_a_file_written_during_the_first_sync_is_followed(folder: Path) -> None:
    fake = WritingIngestion(folder=folder)

    async def scenario() -> None:
        watch = FolderWatch.start(folder, fake)
        # Nothing else changes in the folder: only the watcher can bring the late file in.
        await watch.until(lambda: "late.md" in fake.names("kb"))
        await watch.finish()

    asyncio.run(scenario())
    assert len(fake.names("kb")) == 4


def _handler_before_the_watch(signum: int, frame: object) -> None:
    raise AssertionError(f"signal {signum} reached the handler the watch replaces")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_watch_and_restores_the_handlers(folder: Path, signum: int) -> None:
    fake = FakeIngestion()
    out, buffer = console()
    # A known handler (not the environment's, which may ignore SIGINT): the watch replaces it, then
    # puts it back.
    original = signal.signal(signum, _handler_before_the_watch)

    async def scenario() -> None:
        watching = asyncio.create_task(
            watch_until_signalled(
                FolderSource(folder.resolve()),
                Endpoint("http://ingestion", KEY),
                SyncOptions(collection="kb"),
                console=out,
                debounce_ms=200,
                transport=fake.transport(),
            )
        )
        deadline = time.monotonic() + 20
        while "watching" not in buffer.getvalue():
            assert not watching.done(), buffer.getvalue()
            assert time.monotonic() < deadline, buffer.getvalue()
            await asyncio.sleep(0.05)
        # A few watcher cycles in: the signal lands while the watcher thread runs.
        await asyncio.sleep(1.3)
        os.kill(os.getpid(), signum)
        await asyncio.wait_for(watching, timeout=10)

    try:
        asyncio.run(scenario())
        assert signal.getsignal(signum) is _handler_before_the_watch
    finally:
        signal.signal(signum, original)
    assert len(fake.names("kb")) == 3
