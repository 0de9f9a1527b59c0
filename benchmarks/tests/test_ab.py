"""benchmarks.ab: the alternation, the paired statistics and the response comparison, against two
scripted /search services on loopback; and one run on two real `rag dev` stacks."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from benchmarks import ab
from benchmarks.beir import load_dataset
from benchmarks.client import Hit
from benchmarks.stack import RETRIEVAL_KEY, attached_stack, rag_available
from benchmarks.tests.sample import SAMPLE_DIR, ingest_sample


def hit(text: str, file_id: str, score: float) -> Hit:
    return Hit(file_id=file_id, score=score, text=text, meta={"file_id": file_id})


def test_compare_hits_tells_identical_from_same_ranking_from_different() -> None:
    answer = [hit("one", "f1", 0.9), hit("two", "f2", 0.5)]
    assert ab.compare_hits(answer, list(answer)) == "identical"
    assert ab.compare_hits(answer, [hit("one", "f1", 0.9), hit("two", "f2", 0.4)]) == "same_ranking"
    assert ab.compare_hits(answer, [hit("two", "f2", 0.5), hit("one", "f1", 0.9)]) == "different"


def test_median_difference_of_a_constant_shift_has_a_zero_width_interval() -> None:
    a = [[0.010, 0.012], [0.020, 0.022], [0.030, 0.032]]
    b = [[t + 0.001 for t in timings] for timings in a]
    assert ab.median_difference(a, b) == {"b_minus_a_ms": 1.0, "ci95_low_ms": 1.0, "ci95_high_ms": 1.0}


def test_median_difference_refuses_unpaired_timings() -> None:
    with pytest.raises(ValueError, match="same queries"):
        ab.median_difference([[0.01]], [[0.01], [0.02]])


class ScriptedSearch:
    """A /search service answering every query with one fixed hit; ``altered`` queries get another
    distance (``distance``) or another file (``file``). Arrivals go to a log shared by both services."""

    def __init__(self, name: str, arrivals: list[tuple[str, str]], altered: dict[str, str] | None = None) -> None:
        self.name = name
        self.arrivals = arrivals
        self.altered = altered or {}
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the services speak it

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                assert self.headers["Authorization"] == f"Bearer {RETRIEVAL_KEY}"
                query = body["queries"][0]
                service.arrivals.append((service.name, query))
                change = service.altered.get(query)
                file_id = "other-file" if change == "file" else "file-1"
                distance = 0.25 if change == "distance" else 0.5
                data = json.dumps(
                    {"documents": [["a chunk"]], "metadatas": [[{"file_id": file_id}]], "distances": [[distance]]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


@contextmanager
def serving(*services: ScriptedSearch) -> Iterator[None]:
    threads = [threading.Thread(target=service.httpd.serve_forever, daemon=True) for service in services]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        for service in services:
            service.httpd.shutdown()
            service.httpd.server_close()


def test_each_query_goes_to_both_sides_in_turns_and_differences_are_counted(tmp_path: Path) -> None:
    queries = list(load_dataset("scifact", "test", SAMPLE_DIR).split_queries().values())[:4]
    arrivals: list[tuple[str, str]] = []
    a = ScriptedSearch("a", arrivals)
    b = ScriptedSearch("b", arrivals, altered={queries[1]: "distance", queries[2]: "file"})
    results = tmp_path / "results"
    with serving(a, b):
        code = ab.main(
            [
                "--dataset=scifact",
                f"--a={a.url}",
                f"--b={b.url}/",
                "--requests=4",
                "--rounds=2",
                f"--data-dir={SAMPLE_DIR}",
                f"--results-dir={results}",
            ]
        )
    assert code == 0
    report = json.loads(next(results.glob("*-ab-scifact.json")).read_text())
    # The warm-up (every query on both sides: the sample has fewer than WARM_UP_QUERIES), then
    # each query on both sides, A first on even query + round, B first otherwise.
    warm_up = [(side, query) for query in queries for side in ("a", "b")]
    timed = [
        (side, query)
        for round_index in range(2)
        for index, query in enumerate(queries)
        for side in (("a", "b") if (index + round_index) % 2 == 0 else ("b", "a"))
    ]
    assert arrivals == warm_up + timed
    assert report["sides"]["a"]["requests"] == 8
    assert report["sides"]["b"]["requests"] == 8
    assert report["sides"]["a"]["rss_mib"] is None  # attached: not our process
    assert report["responses"] == {"identical": 2, "same_ranking": 1, "different": 1}
    assert report["median_difference"]["ci95_low_ms"] <= report["median_difference"]["ci95_high_ms"]


def test_one_store_for_both_sides_is_refused(tmp_path: Path) -> None:
    (tmp_path / "work" / "scifact" / "qdrant").mkdir(parents=True)
    with pytest.raises(SystemExit, match="same store"):
        ab.main(
            ["--dataset=scifact", f"--a={tmp_path / 'work'}", f"--b={tmp_path / 'work'}", f"--data-dir={SAMPLE_DIR}"]
        )


@pytest.mark.models
@pytest.mark.slow
@pytest.mark.skipif(not rag_available(), reason="rag-cli (`rag dev`) is not importable yet")
@pytest.mark.skipif(attached_stack() is not None, reason="BENCH_*_URL set: the smoke run starts its own stacks")
def test_two_copies_of_one_store_answer_identically(tmp_path: Path) -> None:
    work_a, work_b = tmp_path / "a", tmp_path / "b"
    ingest_sample(work_a, tmp_path / "quality")
    shutil.copytree(work_a, work_b)
    results = tmp_path / "results"
    code = ab.main(
        [
            "--dataset=scifact",
            f"--a={work_a}",
            f"--b={work_b}",
            "--b-env=QDRANT_SEARCH_THREADS=2",
            "--requests=6",
            "--rounds=1",
            f"--data-dir={SAMPLE_DIR}",
            f"--results-dir={results}",
        ]
    )
    assert code == 0
    report = json.loads(next(results.glob("*-ab-scifact.json")).read_text())
    assert report["responses"] == {"identical": 6, "same_ranking": 0, "different": 0}
    for side in ("a", "b"):
        assert report["sides"][side]["requests"] == 6
        assert report["sides"][side]["rss_mib"] > 50
