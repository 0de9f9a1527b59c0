"""DELETE /api/v1/documents/{file_id} and the inspection endpoint."""

from __future__ import annotations

from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.runtime import ServiceHooks

DOC = "md/unstructured__simple-table.md"


def test_delete_everywhere_is_idempotent(client, upload, docs, points) -> None:
    first = upload(client, docs / DOC, file_id="d", collection_name="file-d").json()["chunks_count"]
    second = upload(client, docs / DOC, file_id="d", collection_name="kb-1").json()["chunks_count"]
    response = client.delete("/api/v1/documents/d")
    assert response.status_code == 200
    assert response.json() == {"status": True, "file_id": "d", "chunks_deleted": first + second}
    assert points(client, file_id="d") == []
    assert client.delete("/api/v1/documents/d").json()["chunks_deleted"] == 0


def test_delete_scoped_to_one_collection(client, upload, docs, points) -> None:
    upload(client, docs / DOC, file_id="s", collection_name="file-s")
    upload(client, docs / DOC, file_id="s", collection_name="kb-a")
    response = client.delete("/api/v1/documents/s", params={"collection_name": "kb-a"})
    assert response.json()["collection_name"] == "kb-a"
    assert response.json()["chunks_deleted"] >= 1
    assert points(client, file_id="s", collection_name="kb-a") == []
    assert points(client, file_id="s", collection_name="file-s")


class BrokenIndex(ChunkIndex):
    async def delete_file(self, file_id: str, collection_name: str | None = None) -> int:
        from shared_contract import QdrantUnavailableError

        raise QdrantUnavailableError("qdrant delete failed: ConnectError")


def test_delete_qdrant_error_is_500_delete_failed(app_client) -> None:
    with app_client(hooks=ServiceHooks(index_factory=BrokenIndex)) as client:
        response = client.delete("/api/v1/documents/x")
        assert response.status_code == 500
        assert response.json() == {
            "status": False,
            "error": "Deleting the document's chunks failed.",
            "code": "DELETE_FAILED",
        }
        assert 'delete_requests_total{code="DELETE_FAILED",outcome="failure"} 1.0' in client.get("/metrics").text


def test_inspection_is_404_unless_enabled(client) -> None:
    assert client.get("/api/v1/documents/x/chunks").status_code == 404


def test_inspection_lists_chunks(app_client, upload, docs) -> None:
    with app_client(enable_inspection_api=True) as client:
        upload(client, docs / "md/docling__wiki.md", file_id="i")
        body = client.get("/api/v1/documents/i/chunks", params={"limit": 3}).json()
        assert body["returned"] == 3
        assert body["stats"]["total_chunks"] >= 3
        assert body["stats"]["extraction_engine"] == "kreuzberg"
        assert body["next_offset"] is not None
        assert all(len(chunk["content"]) <= 201 for chunk in body["chunks"])
        full = client.get("/api/v1/documents/i/chunks", params={"include_content": "full", "limit": 1000}).json()
        assert full["next_offset"] is None
        assert [chunk["split_id"] for chunk in full["chunks"]] == list(range(full["returned"]))
        assert client.get("/api/v1/documents/i/chunks", params={"include_content": "maybe"}).status_code == 400
