"""Helpers of the hardening tests: raw-bytes uploads and the "previous version kept" check."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import pytest
from fastapi.testclient import TestClient

from rag_runtime.store import PointRecord

if TYPE_CHECKING:
    import httpx2

    from ..conftest import Points  # noqa: TID252


class IngestBytes(Protocol):
    """The ``ingest_bytes`` fixture."""

    def __call__(
        self, client: TestClient, data: bytes, filename: str, file_id: str, **fields: str
    ) -> httpx2.Response: ...


AssertKept = Callable[[TestClient, str, list[PointRecord]], None]


def _ingest_bytes(client: TestClient, data: bytes, filename: str, file_id: str, **fields: str) -> httpx2.Response:
    form = {"file_id": file_id, "filename": filename, "collection_name": f"file-{file_id}", "user_id": "u1", **fields}
    return client.put("/api/v1/ingest", data=form, files={"file": (filename, data)})


@pytest.fixture
def ingest_bytes() -> IngestBytes:
    """``ingest_bytes(client, data, filename, file_id, **form_fields)`` -> the ingest response."""
    return _ingest_bytes


@pytest.fixture
def assert_kept(points: Points) -> AssertKept:
    """``assert_kept(client, file_id, before)``: the same committed points, none pending, service healthy."""

    def check(client: TestClient, file_id: str, before: list[PointRecord]) -> None:
        after = points(client, file_id=file_id)
        assert sorted(r.point_id for r in after) == sorted(r.point_id for r in before)
        assert {r.payload["meta"]["ingest_state"] for r in after} == {"live"}
        assert client.get("/health").status_code == 200
        assert client.get("/health/ready").status_code == 200

    return check
