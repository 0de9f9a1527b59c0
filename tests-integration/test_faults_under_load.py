"""Faults and load from outside: searches while ingesting, concurrent re-ingests of one file.

Latencies under load go to the test report's properties (and to $FAULT_REPORT_DIR/<name>.json when
set) for docs/benchmarks.md; they never decide pass or fail.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from integration_support import FIXTURES, Stack, ingest_multipart
from test_ingest_then_search import CONTRACT_PDF, TABLES_DOCX, chunks_of

SEARCHERS = 8
INSURANCE_QUESTION = "What insurance coverage must the consultant obtain and maintain?"
# Written into another tenant while the searchers run: every fixture format the stack reads.
WRITES = [
    CONTRACT_PDF,
    TABLES_DOCX,
    FIXTURES / "tika__danish_europarl_sample.txt",
    CONTRACT_PDF,
    TABLES_DOCX,
    CONTRACT_PDF,
]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def _report(record_property: Callable[[str, object], None], name: str, data: dict[str, Any]) -> None:
    record_property(name, json.dumps(data))
    target = os.environ.get("FAULT_REPORT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        (Path(target) / f"{name}.json").write_text(json.dumps(data, indent=2), encoding="utf-8")


def test_eight_searchers_while_ingesting_get_no_errors_and_the_same_answer(
    stack: Stack, record_property: Callable[[str, object], None]
) -> None:
    read_kb, write_kb = f"kb-read-{uuid.uuid4().hex[:8]}", f"kb-write-{uuid.uuid4().hex[:8]}"
    pdf_id = str(uuid.uuid4())
    ingest_multipart(stack.ingestion(), CONTRACT_PDF, pdf_id, read_kb)

    writing_done = threading.Event()
    failures: list[str] = []
    latencies: list[float] = []
    lock = threading.Lock()

    def searcher() -> None:
        with httpx.Client(
            base_url=stack.retrieval_url, headers={"Authorization": f"Bearer {stack.retrieval_key}"}, timeout=60
        ) as client:
            while not writing_done.is_set():
                started = time.perf_counter()
                response = client.post(
                    "/search", json={"queries": [INSURANCE_QUESTION], "collection_names": [read_kb], "k": 5}
                )
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    if response.status_code != 200:
                        failures.append(f"{response.status_code} {response.text[:200]}")
                    elif response.json()["metadatas"][0][0]["file_id"] != pdf_id:
                        failures.append(f"wrong top hit: {response.json()['metadatas'][0][0]}")

    def writer() -> list[int]:
        chunks = []
        for index, path in enumerate(WRITES):
            body = ingest_multipart(stack.ingestion(), path, f"write-{index}-{uuid.uuid4().hex[:6]}", write_kb)
            chunks.append(body["chunks_count"])
        return chunks

    with ThreadPoolExecutor(max_workers=SEARCHERS + 1) as pool:
        searches = [pool.submit(searcher) for _ in range(SEARCHERS)]
        started = time.perf_counter()
        try:
            written = pool.submit(writer).result(timeout=600)
        finally:
            writing_done.set()
        wall = time.perf_counter() - started
        for future in searches:
            future.result(timeout=120)

    assert failures == []
    assert all(count > 0 for count in written)
    assert len(latencies) >= SEARCHERS
    _report(
        record_property,
        "searches_while_ingesting",
        {
            "searchers": SEARCHERS,
            "searches": len(latencies),
            "documents_written": len(written),
            "chunks_written": sum(written),
            "wall_s": round(wall, 2),
            "search_p50_ms": round(statistics.median(latencies) * 1000, 1),
            "search_p95_ms": round(_percentile(latencies, 95) * 1000, 1),
            "searches_per_s": round(len(latencies) / wall, 1),
        },
    )


def test_concurrent_reingests_of_one_file_leave_exactly_one_whole_version(stack: Stack) -> None:
    kb, file_id = f"kb-race-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    expected = ingest_multipart(stack.ingestion(), TABLES_DOCX, file_id, kb)["chunks_count"]
    for trial in range(20):
        with ThreadPoolExecutor(max_workers=2) as pool:
            bodies = list(pool.map(lambda _: ingest_multipart(stack.ingestion(), TABLES_DOCX, file_id, kb), range(2)))
        assert [body["status"] for body in bodies] == [True, True], f"trial {trial}"
        chunks = chunks_of(stack, file_id)
        assert len({chunk["meta"]["ingest_version"] for chunk in chunks}) == 1, f"trial {trial}"
        assert sorted(chunk["meta"]["split_id"] for chunk in chunks) == list(range(expected)), f"trial {trial}"
        assert {chunk["meta"].get("ingest_state", "live") for chunk in chunks} == {"live"}, f"trial {trial}"


def test_a_200_mb_upload_is_refused_while_streaming_without_buffering_it(
    stack: Stack, record_property: Callable[[str, object], None]
) -> None:
    if stack.pid is None:
        pytest.skip("needs the stack's own process to read its memory")
    process = psutil.Process(stack.pid)
    boundary = "fault-suite-boundary"
    head = (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="file_id"\r\n\r\nhuge-upload\r\n'
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="filename"\r\n\r\nhuge.txt\r\n'
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="collection_name"\r\n\r\nkb-huge\r\n'
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="user_id"\r\n\r\nuser-1\r\n'
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="file"; filename="huge.txt"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    megabyte = b"lorem ipsum dolor sit amet " * 38836 + b"x" * 4
    peak = baseline = process.memory_info().rss
    sent = 0

    def body() -> Any:
        nonlocal peak, sent
        yield head
        for _ in range(200):
            sent += len(megabyte)
            peak = max(peak, process.memory_info().rss)
            yield megabyte
        yield f"\r\n--{boundary}--\r\n".encode()

    with httpx.Client(
        base_url=stack.ingestion_url, headers={"Authorization": f"Bearer {stack.ingestion_key}"}, timeout=120
    ) as client:
        try:
            response = client.put(
                "/api/v1/ingest",
                content=body(),
                headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
            )
        except httpx.WriteError:
            pytest.fail(f"the service closed the connection without an answer after {sent} bytes")
    assert response.status_code == 413, response.text
    assert response.json()["status"] is False
    assert "MAX_UPLOAD_BYTES" in response.json()["error"]
    growth_mib = (peak - baseline) / 2**20
    _report(
        record_property, "upload_200_mb", {"sent_mib": round(sent / 2**20, 1), "rss_growth_mib": round(growth_mib, 1)}
    )
    # The service must stop reading at its cap, not hold the body: far below the 200 MB sent.
    assert growth_mib < 64
    assert stack.ingestion().get("/health").status_code == 200


def _aborted_by_clients(stack: Stack) -> float:
    metrics = stack.ingestion().get("/metrics").text
    prefix = 'ingest_requests_total{code="CLIENT_DISCONNECTED",outcome="aborted"} '
    return sum(float(line.removeprefix(prefix)) for line in metrics.splitlines() if line.startswith(prefix))


def test_a_client_that_disconnects_mid_ingest_leaves_the_previous_version_and_no_orphan(stack: Stack) -> None:
    kb, file_id = f"kb-gone-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    kept = ingest_multipart(stack.ingestion(), TABLES_DOCX, file_id, kb)["chunks_count"]
    before = _aborted_by_clients(stack)
    # ~1,000 chunks: minutes of embedding on these cores, so the client is gone long before a commit.
    words = " ".join(f"ledger{index} entry balance audited quarterly" for index in range(60_000))
    with (
        httpx.Client(
            base_url=stack.ingestion_url, headers={"Authorization": f"Bearer {stack.ingestion_key}"}, timeout=2
        ) as client,
        pytest.raises(httpx.ReadTimeout),
    ):
        client.put(
            "/api/v1/ingest",
            files={"file": ("ledger.txt", words.encode(), "text/plain")},
            data={"file_id": file_id, "filename": "ledger.txt", "collection_name": kb, "user_id": "user-1"},
        )
    deadline = time.monotonic() + 300  # a deadlock guard, not a timing assertion
    while _aborted_by_clients(stack) == before:
        assert time.monotonic() < deadline, "the service never noticed the client had left"
        time.sleep(0.5)
    chunks = chunks_of(stack, file_id)
    assert len(chunks) == kept
    assert {chunk["meta"]["name"] for chunk in chunks} == {TABLES_DOCX.name}
    assert len({chunk["meta"]["ingest_version"] for chunk in chunks}) == 1
