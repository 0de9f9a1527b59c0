"""One small end-to-end run of each benchmark through a real `rag dev` stack, so they keep working.

They read a committed SciFact sample (fixtures/scifact-sample: 40 docs, 10 test queries), never the evaluation data beside the checkout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import quality, speed, stages
from benchmarks.stack import attached_stack, rag_available
from benchmarks.tests.sample import SAMPLE_DIR, ingest_sample

pytestmark = [
    pytest.mark.models,
    pytest.mark.slow,
    pytest.mark.skipif(not rag_available(), reason="rag-cli (`rag dev`) is not importable yet"),
    pytest.mark.skipif(attached_stack() is not None, reason="BENCH_*_URL set: smoke runs start their own stack"),
]


def test_quality_smoke(tmp_path: Path) -> None:
    results = tmp_path / "results"
    code = quality.main(
        [
            "--dataset=scifact",
            "--configs=dense,hybrid,rerank",
            "--limit-docs=20",
            "--limit-queries=5",
            f"--data-dir={SAMPLE_DIR}",
            f"--work-dir={tmp_path / 'work'}",
            f"--results-dir={results}",
        ]
    )
    assert code == 0
    summary = json.loads(next(results.glob("*-quality-summary.json")).read_text())
    rows = {row["config"]: row for row in summary["results"]}
    assert "skipped" in rows["rerank"]  # no --rerank-url: reported, not run
    for config in ("dense", "hybrid"):
        row = rows[config]
        assert row["queries"] == 5
        assert row["docs_indexed"] == 20
        assert row["foreign_hits"] == 0
        # The 5 queries' relevant docs are among the 20, so a working stack finds most of them.
        assert row["recall@100"] == 1.0
        assert row["ndcg@10"] > 0.5
        lines = Path(row["per_query_file"]).read_text().splitlines()
        assert len(lines) == 5
        assert {"qid", "ndcg@10", "recall@100", "mrr@10", "top10"} <= set(json.loads(lines[0]))
    done = (tmp_path / "work" / "scifact" / "ingested.tsv").read_text().splitlines()
    assert len(done) == 20  # ingested once, reused by the second config


def test_speed_smoke(tmp_path: Path) -> None:
    results = tmp_path / "results"
    code = speed.main(
        [
            "--stages=12",
            "--requests=8",
            "--concurrency=1,4",
            "--modes=hybrid+rerank",
            "--embed-sample=8",
            f"--data-dir={SAMPLE_DIR}",
            f"--work-dir={tmp_path / 'work'}",
            f"--results-dir={results}",
        ]
    )
    assert code == 0
    report = json.loads(next(results.glob("*-speed-scifact.json")).read_text())
    stage = report["stages"][0]
    assert stage["ingest"]["docs"] == 12
    assert stage["ingest"]["chunks"] >= 12
    assert stage["ingest"]["rss_peak_mib"] > 50
    assert stage["raw_embedding"]["pipeline_efficiency"] > 0
    rerank = stage["search"]["hybrid+rerank"]
    assert rerank["c1"]["requests"] == 8
    assert rerank["c1"]["httpx_p50_ms"] > 0  # the same searches through httpx, alternated
    assert rerank["c4"]["p50_ms"] > 0
    assert stage["search"]["rerank_server"]["calls"] > 0  # the rerank stage really called it


def test_stages_smoke(tmp_path: Path) -> None:
    work = tmp_path / "work"
    ingest_sample(work, tmp_path / "quality")
    results = tmp_path / "results"
    code = stages.main(
        [
            "--dataset=scifact",
            "--queries=4",
            f"--data-dir={SAMPLE_DIR}",
            f"--work-dir={work}",
            f"--results-dir={results}",
        ]
    )
    assert code == 0
    report = json.loads(next(results.glob("*-stages-scifact.json")).read_text())
    assert report["chunks_in_store"] >= 12
    for stage in ("embed fp32 (1 thread)", "embed int8 (1 thread)", stages.FUSED_SESSION, "legs batch"):
        assert report["stages"][stage]["p50_ms"] > 0
    assert report["stages"]["read of the fused hits"]["p50_ms"] > 0
    assert report["int8_vs_fp32_query_cosine"]["min"] > 0.98
    assert report["int8_skiplayernorm_fused_vs_fp32_query_cosine"]["min"] > 0.98
    # One tenant holds the whole store: per-tenant IDF scores as the store-wide one does.
    assert report["idf"]["legs_compared"] > 0
    assert report["idf"]["same_ranking_and_scores"] == report["idf"]["legs_compared"]
    # A tenant list with an empty second tenant matches the same points as the tenant alone.
    listed = report["with_an_empty_tenant"]
    assert listed["legs_compared"] > 0
    assert listed["same_ranking_and_scores"] == listed["legs_compared"]
