"""No blocking on the event loop, and concurrent re-ingests of one file converge to one version."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ingestion_service.pipeline.indexing import IngestJob
from ingestion_service.runtime import ServiceHooks

LARGE = "pdf/unstructured__multi-column-2p.pdf"


def test_health_answers_at_once_while_two_large_ingests_run(client, upload, docs) -> None:
    latencies: list[float] = []
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(upload, client, docs / LARGE, file_id=f"large{i}") for i in range(2)]
        time.sleep(0.2)  # let both reach the pipeline
        while not all(future.done() for future in futures):
            started = time.perf_counter()
            assert client.get("/health").status_code == 200
            latencies.append(time.perf_counter() - started)
            time.sleep(0.05)
        responses = [future.result() for future in futures]
    assert all(response.status_code == 200 for response in responses)
    assert all(response.json()["chunks_count"] > 5 for response in responses)
    assert len(latencies) >= 5, "the ingests finished too fast to measure anything"
    assert max(latencies) < 0.5, latencies


def test_parallel_reingests_of_one_file_end_with_exactly_one_version(app_client, upload, docs, points) -> None:
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


def test_two_replicas_interleaved_between_write_and_commit(app_client, upload, docs, points) -> None:
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


def test_newer_request_waiting_to_commit_still_wins(app_client, upload, docs, points) -> None:
    """B (newer) has written and waits; A (older) finishes first and sweeps; B's commit then wins."""
    a_done = threading.Event()

    def b_pauses(job: IngestJob) -> None:
        assert a_done.wait(timeout=60)

    index_name = "replicas2"
    with (
        app_client(qdrant_index=index_name, hooks=ServiceHooks(before_commit=b_pauses)) as replica_b,
        app_client(qdrant_index=index_name) as replica_a,
    ):
        # A's request starts first (older seq); B writes and then waits until A has committed.
        with ThreadPoolExecutor(2) as pool:
            a_future = pool.submit(upload, replica_a, docs / LARGE, file_id="w")
            time.sleep(0.05)
            b_future = pool.submit(upload, replica_b, docs / "md/docling__wiki.md", file_id="w")
            a_response = a_future.result()
            a_done.set()
            b_response = b_future.result()
        a_version = a_response.json()["extraction"]["ingest_version"]
        b_version = b_response.json()["extraction"]["ingest_version"]
        assert a_version < b_version
        stored = points(replica_a, file_id="w")
        assert {r.payload["meta"]["ingest_version"] for r in stored} == {b_version}
