"""No blocking on the event loop, and concurrent re-ingests of one file converge to one version.

Ordering is forced with events held inside the pipeline, never with sleeps or measured latencies.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from haystack import Document

from ingestion_service.documents import SourceFile
from ingestion_service.documents.base import Converter
from ingestion_service.documents.registry import default_factories
from ingestion_service.indexing.job import IngestJob
from ingestion_service.runtime import ServiceHooks
from ingestion_service.settings import Settings

if TYPE_CHECKING:
    from ..conftest import AppFactory, Points, Upload  # noqa: TID252

LARGE = "pdf/unstructured__multi-column-2p.pdf"
# Only a guard against a deadlocked test; no assertion depends on how long anything takes.
DEADLOCK_GUARD_SECONDS = 120


class Gate:
    """Counts the runs that reach it and holds each one until ``open()``."""

    def __init__(self) -> None:
        self._arrivals = threading.Semaphore(0)
        self._open = threading.Event()

    def pass_through(self) -> None:
        self._arrivals.release()
        assert self._open.wait(timeout=DEADLOCK_GUARD_SECONDS), "the test never opened the gate"

    def wait_for(self, runs: int) -> None:
        for _ in range(runs):
            assert self._arrivals.acquire(timeout=DEADLOCK_GUARD_SECONDS), "a run never reached the gate"

    def open(self) -> None:
        self._open.set()


class GatedEngine:
    """The real kreuzberg engine behind a gate (the pipeline calls it in its worker thread)."""

    name = "kreuzberg"
    profiles: frozenset[str] = frozenset()

    def __init__(self, real: Converter, gate: Gate) -> None:
        self.real = real
        self.gate = gate

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:
        self.gate.pass_through()
        return self.real.convert(source, profile=profile)


def gated_kreuzberg(gate: Gate) -> ServiceHooks:
    build_real = default_factories()["kreuzberg"]

    def factory(settings: Settings) -> Converter:
        return GatedEngine(build_real(settings), gate)

    return ServiceHooks(converter_factories={"kreuzberg": factory})


def test_health_answers_while_two_ingests_are_held_inside_the_pipeline(
    app_client: AppFactory, upload: Upload, docs: Path
) -> None:
    gate = Gate()
    with app_client(hooks=gated_kreuzberg(gate), ingest_concurrency=2) as client, ThreadPoolExecutor(3) as pool:
        try:
            futures = [pool.submit(upload, client, docs / LARGE, file_id=f"large{i}") for i in range(2)]
            gate.wait_for(2)  # both runs are inside extraction at once
            # Both pipelines are parked; if either ran on the event loop, nothing could answer now.
            health = pool.submit(client.get, "/health").result(timeout=DEADLOCK_GUARD_SECONDS)
            assert health.status_code == 200
            assert health.json() == {"status": "ok"}
            assert not any(future.done() for future in futures)
        finally:
            gate.open()
        responses = [future.result() for future in futures]
    assert [response.status_code for response in responses] == [200, 200]
    assert all(response.json()["chunks_count"] > 5 for response in responses)


def test_parallel_reingests_of_one_file_end_with_exactly_one_version(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points
) -> None:
    with app_client(ingest_concurrency=4) as client:
        with ThreadPoolExecutor(4) as pool:
            responses = list(pool.map(lambda _: upload(client, docs / "md/docling__wiki.md", file_id="same"), range(4)))
        assert all(response.status_code == 200 for response in responses)
        stored = points(client, file_id="same")
        stored_versions = {record.payload["meta"]["ingest_version"] for record in stored}
        assert len(stored_versions) == 1
        assert len(stored) == responses[0].json()["chunks_count"]
        newest = max(response.json()["extraction"]["ingest_version"] for response in responses)
        assert stored_versions == {newest}


def test_two_replicas_interleaved_between_write_and_commit(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points
) -> None:
    """Replica A (older request) writes, then waits before committing until replica B is done."""
    b_done = threading.Event()
    a_written = threading.Event()

    def a_pauses(job: IngestJob) -> None:
        a_written.set()
        assert b_done.wait(timeout=60)

    index_name = "replicas"
    with (
        app_client(qdrant_index=index_name, hooks=ServiceHooks(before_commit=a_pauses)) as replica_a,
        app_client(qdrant_index=index_name) as replica_b,
    ):
        upload(replica_b, docs / "md/unstructured__simple-table.md", file_id="r")  # a previous version
        with ThreadPoolExecutor(1) as pool:
            a_future = pool.submit(upload, replica_a, docs / "md/docling__wiki.md", file_id="r")
            assert a_written.wait(timeout=60)
            b_response = upload(replica_b, docs / "md/docling__wiki.md", file_id="r")
            b_done.set()
            a_response = a_future.result()
        assert a_response.status_code == b_response.status_code == 200
        assert a_response.json()["extraction"]["superseded"] is True
        assert b_response.json()["extraction"]["superseded"] is False
        stored = points(replica_b, file_id="r")
        assert {r.payload["meta"]["ingest_version"] for r in stored} == {
            b_response.json()["extraction"]["ingest_version"]
        }
        assert len(stored) == b_response.json()["chunks_count"]


def test_a_newer_request_resending_the_stored_bytes_wins_over_an_older_reingest_in_flight(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points
) -> None:
    """A (older) re-ingests other bytes and waits before its commit; B (newer) sends the stored bytes
    again and is answered unchanged. B's content must stay, as the newest request's."""
    b_done = threading.Event()
    a_written = threading.Event()

    def a_pauses(job: IngestJob) -> None:
        a_written.set()
        assert b_done.wait(timeout=DEADLOCK_GUARD_SECONDS)

    index_name = "replicas-unchanged"
    stored_file = docs / "md/unstructured__simple-table.md"
    with (
        app_client(qdrant_index=index_name, hooks=ServiceHooks(before_commit=a_pauses)) as replica_a,
        app_client(qdrant_index=index_name) as replica_b,
        ThreadPoolExecutor(1) as pool,
    ):
        first = upload(replica_b, stored_file, file_id="u").json()
        a_future = pool.submit(upload, replica_a, docs / "md/docling__wiki.md", file_id="u")
        try:
            assert a_written.wait(timeout=DEADLOCK_GUARD_SECONDS)
            b_response = upload(replica_b, stored_file, file_id="u")
        finally:
            b_done.set()
        a_response = a_future.result()
        assert b_response.status_code == a_response.status_code == 200
        assert b_response.json()["unchanged"] is True
        assert a_response.json()["extraction"]["superseded"] is True
        stored = points(replica_b, file_id="u")
        assert {r.payload["meta"]["source_sha256"] for r in stored} == {first["content_hash"]}
        assert {r.payload["meta"]["ingest_version"] for r in stored} == {first["extraction"]["ingest_version"]}
        assert len(stored) == first["chunks_count"]


def test_newer_request_waiting_to_commit_still_wins(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points
) -> None:
    """B (newer) has written and waits; A (older) finishes first and sweeps; B's commit then wins."""
    a_done = threading.Event()
    b_written = threading.Event()
    a_started = Gate()

    def b_pauses(job: IngestJob) -> None:
        b_written.set()
        assert a_done.wait(timeout=DEADLOCK_GUARD_SECONDS)

    index_name = "replicas2"
    with (
        app_client(qdrant_index=index_name, hooks=ServiceHooks(before_commit=b_pauses)) as replica_b,
        app_client(qdrant_index=index_name, hooks=gated_kreuzberg(a_started)) as replica_a,
        ThreadPoolExecutor(2) as pool,
    ):
        try:
            # A's request takes its version when it starts, so A reaching extraction makes it the older one.
            a_future = pool.submit(upload, replica_a, docs / LARGE, file_id="w")
            a_started.wait_for(1)
            b_future = pool.submit(upload, replica_b, docs / "md/docling__wiki.md", file_id="w")
            assert b_written.wait(timeout=DEADLOCK_GUARD_SECONDS)  # B has written; it commits only after A
        finally:
            a_started.open()
        try:
            a_response = a_future.result()
        finally:
            a_done.set()
        b_response = b_future.result()
        a_version = a_response.json()["extraction"]["ingest_version"]
        b_version = b_response.json()["extraction"]["ingest_version"]
        assert a_version < b_version
        stored = points(replica_a, file_id="w")
        assert {r.payload["meta"]["ingest_version"] for r in stored} == {b_version}


def test_a_delete_while_a_reingest_writes_is_undone_by_its_commit_never_half_of_it(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points
) -> None:
    """The DELETE lands after the re-ingest wrote every chunk and before it commits: it used to remove
    the pending chunks too, and the commit then published what was left (here: nothing)."""
    armed = threading.Event()
    written = threading.Event()
    deleted = threading.Event()

    def hold(job: IngestJob) -> None:
        if armed.is_set():
            written.set()
            assert deleted.wait(timeout=DEADLOCK_GUARD_SECONDS)

    with app_client(hooks=ServiceHooks(before_commit=hold)) as client, ThreadPoolExecutor(1) as pool:
        previous = upload(client, docs / "md/unstructured__simple-table.md", file_id="held", collection_name="kb-held")
        assert previous.status_code == 200, previous.text
        armed.set()
        ingesting = pool.submit(upload, client, docs / "md/docling__wiki.md", file_id="held", collection_name="kb-held")
        assert written.wait(timeout=DEADLOCK_GUARD_SECONDS)
        response = client.delete("/api/v1/documents/held", params={"collection_name": "kb-held"})
        assert response.status_code == 200, response.text
        assert response.json()["chunks_deleted"] == previous.json()["chunks_count"]
        deleted.set()
        ingest = ingesting.result(timeout=DEADLOCK_GUARD_SECONDS)
        assert ingest.status_code == 200, ingest.text
        stored = points(client, file_id="held")
    assert len(stored) == ingest.json()["chunks_count"] > 1
    assert {record.payload["meta"]["ingest_version"] for record in stored} == {
        ingest.json()["extraction"]["ingest_version"]
    }
    assert {record.payload["meta"]["ingest_state"] for record in stored} == {"live"}
