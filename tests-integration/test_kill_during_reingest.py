"""kill -9 during a real re-ingest, on the embedded engine: readers see one whole version, never a mix.

Each file gets version 1 through a real ingestion service, then a re-ingest (version 2) whose
process is SIGKILLed at one instant: after the first written batch, after the whole write but
before the commit, or between the commit's publish and its sweep. A real `rag dev` then opens the
same directory and the file must hold exactly one complete version (the old one when the kill
came before the publish, the new one after it), in the inspection API, in /search, and for an
``overwrite=false`` ingest, which must never accept a partial file as "kept existing".
"""

from __future__ import annotations

import contextlib
import os
import queue
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from integration_support import READY_TIMEOUT_S, REPO_ROOT, free_port, start_rag_dev, stop_process, wait_ready

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
TENANT = "kb-kill"
# kill point -> the version that must survive
POINTS = {"after-first-batch": 1, "before-commit": 1, "after-publish": 2}


def document(version: int, paragraphs: int) -> bytes:
    """A Markdown file whose every paragraph names its version, long enough for many chunks."""
    words = "alpha" if version == 1 else "omega"
    body = "\n\n".join(
        f"## Section {i}\n\n"
        + " ".join(f"{words}{i} marker{version} sentence number {j} about topic {i}." for j in range(40))
        for i in range(paragraphs)
    )
    return f"# Report version {version}\n\n{body}\n".encode()


@dataclass
class Service:
    process: subprocess.Popen[str]
    url: str
    lines: queue.Queue[str]

    def wait_for(self, marker: str, timeout: float = 300) -> None:
        while True:
            line = self.lines.get(timeout=timeout)
            if line.strip() == marker:
                return


def _env(keys: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, **keys, "ENABLE_INSPECTION_API": "true", "ENABLE_QUERY_GENERATION": "false"}
    env.setdefault("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache" / "models"))
    env.pop("QDRANT_URI", None)
    return env


def start_target(store: Path, point: str, keys: dict[str, str]) -> Service:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(HERE / "kill_target.py"), str(port), str(store), point],
        env=_env(keys),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, process, None, READY_TIMEOUT_S)
    return Service(process, url, lines)


def ingest(url: str, key: str, file_id: str, content: bytes, **extra: str) -> httpx.Response:
    return httpx.put(
        f"{url}/api/v1/ingest",
        headers={"Authorization": f"Bearer {key}"},
        data={"file_id": file_id, "filename": f"{file_id}.md", "collection_name": TENANT, "user_id": "u", **extra},
        files={"file": (f"{file_id}.md", content)},
        timeout=600,
    )


@pytest.fixture(scope="module")
def killed_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], dict[str, int]]:
    """A store where each file's re-ingest was killed at its point; yields (dir, keys, v1 chunk counts)."""
    store = tmp_path_factory.mktemp("kill") / "qdrant"
    keys = {"INGESTION_API_KEY": secrets.token_urlsafe(32), "RETRIEVAL_API_KEY": secrets.token_urlsafe(32)}
    first_counts: dict[str, int] = {}
    service = start_target(store, "none", keys)
    try:
        for point in POINTS:
            response = ingest(service.url, keys["INGESTION_API_KEY"], point, document(1, 6))
            assert response.status_code == 200, response.text
            first_counts[point] = response.json()["chunks_count"]
    finally:
        stop_process(service.process)
    for point in POINTS:
        service = start_target(store, point, keys)

        def reingest(file_id: str = point, url: str = service.url) -> None:
            with contextlib.suppress(httpx.TransportError):  # the server is killed mid-request
                ingest(url, keys["INGESTION_API_KEY"], file_id, document(2, 9))

        worker = threading.Thread(target=reingest, daemon=True)
        worker.start()
        try:
            service.wait_for(f"KILL-POINT {point}")
        finally:
            service.process.kill()  # SIGKILL: no clean-up of any kind runs
            service.process.wait(timeout=30)
            worker.join(timeout=30)
    return store, keys, first_counts


@pytest.fixture(scope="module")
def restarted(killed_store: tuple[Path, dict[str, str], dict[str, int]]) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """`rag dev` on the killed store: (ingestion client, retrieval client)."""
    store, keys, _ = killed_store
    log = store.parent / "dev.log"
    process, ingestion_url, retrieval_url = start_rag_dev(store, _env(keys), log)
    try:
        wait_ready(ingestion_url, process, log, READY_TIMEOUT_S)
        wait_ready(retrieval_url, process, log, READY_TIMEOUT_S)
        with (
            httpx.Client(
                base_url=ingestion_url, headers={"Authorization": f"Bearer {keys['INGESTION_API_KEY']}"}, timeout=600
            ) as ingestion,
            httpx.Client(
                base_url=retrieval_url, headers={"Authorization": f"Bearer {keys['RETRIEVAL_API_KEY']}"}, timeout=60
            ) as retrieval,
        ):
            yield ingestion, retrieval
    finally:
        stop_process(process)


def stored_chunks(ingestion: httpx.Client, file_id: str) -> list[dict[str, object]]:
    response = ingestion.get(
        f"/api/v1/documents/{file_id}/chunks",
        params={"collection_name": TENANT, "limit": 1000, "include_content": "full"},
    )
    assert response.status_code == 200, response.text
    chunks: list[dict[str, object]] = response.json()["chunks"]
    return chunks


@pytest.mark.parametrize("point", list(POINTS))
def test_the_file_holds_exactly_one_complete_version(
    point: str, killed_store: tuple[Path, dict[str, str], dict[str, int]], restarted: tuple[httpx.Client, httpx.Client]
) -> None:
    ingestion, _ = restarted
    chunks = stored_chunks(ingestion, point)
    survivor, other = POINTS[point], 3 - POINTS[point]
    assert chunks
    assert not [chunk for chunk in chunks if f"marker{other}" in str(chunk["content"])]
    assert len({chunk["meta"]["ingest_version"] for chunk in chunks}) == 1  # type: ignore[index]
    split_ids = sorted(int(chunk["split_id"]) for chunk in chunks)  # type: ignore[call-overload]
    assert split_ids == list(range(len(chunks)))  # complete: no chunk of the version is missing
    if survivor == 1:
        assert len(chunks) == killed_store[2][point]


@pytest.mark.parametrize("point", list(POINTS))
def test_search_serves_only_the_surviving_version(point: str, restarted: tuple[httpx.Client, httpx.Client]) -> None:
    _, retrieval = restarted
    survivor, other = POINTS[point], 3 - POINTS[point]
    served: list[str] = []
    for query in (f"marker{survivor} sentence", f"marker{other} sentence", "topic 3 sentence number"):
        response = retrieval.post("/search", json={"queries": [query], "collection_names": [TENANT], "k": 50})
        assert response.status_code == 200, response.text
        body = response.json()
        served += [
            text
            for text, meta in zip(body["documents"][0], body["metadatas"][0], strict=True)
            if meta["file_id"] == point
        ]
    assert served, "the file must be searchable"
    assert any(f"marker{survivor}" in text for text in served)
    assert not any(f"marker{other}" in text for text in served)


@pytest.mark.parametrize("point", list(POINTS))
def test_overwrite_false_keeps_only_a_complete_version(
    point: str, restarted: tuple[httpx.Client, httpx.Client]
) -> None:
    ingestion, _ = restarted
    complete = len(stored_chunks(ingestion, point))
    response = ingestion.put(
        "/api/v1/ingest",
        data={
            "file_id": point,
            "filename": f"{point}.md",
            "collection_name": TENANT,
            "user_id": "u",
            "overwrite": "false",
        },
        files={"file": (f"{point}.md", document(3, 2))},
    )
    assert response.status_code == 200, response.text
    assert response.json()["extraction"]["kept_existing"] is True
    assert response.json()["chunks_count"] == complete
