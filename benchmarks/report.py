"""Markdown tables from the newest result files (for docs/benchmarks.md).

python -m benchmarks.report            # quality rows + tuned settings + the newest speed report
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.configs import tuned_path
from benchmarks.quality import RESULTS_DIR

PUBLISHED = {
    "scifact": [
        ("BM25 (Elasticsearch, BEIR paper)", "0.665", "–"),
        ("BM25 flat, Anserini", "0.679", "0.925"),
        ("BM25 bm25s, MTEB", "0.687", "0.913"),
        ("all-MiniLM-L6-v2, MTEB", "0.645", "0.925"),
        ("SPLADE++ EnsembleDistil, Anserini", "0.704", "0.935"),
        ("BM25 → MiniLM-L6 CE rerank, BEIR paper", "0.688", "–"),
    ],
    "norquad": [("BM25 + Norwegian Snowball stemmer (bm25s, local)", "0.920", "0.998")],
}


def latest_quality_rows(results_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(dataset, config) -> the newest row over every quality summary."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(results_dir.glob("*-quality-summary.json")):
        summary = json.loads(path.read_text(encoding="utf-8"))
        for row in summary["results"]:
            if row.get("limit_docs") is None and row.get("limit_queries") is None:
                rows[(row["dataset"], row["config"])] = {
                    **row,
                    "_date": summary["date"],
                    "_command": summary["command"],
                }
    return rows


def quality_tables(results_dir: Path) -> str:
    rows = latest_quality_rows(results_dir)
    out: list[str] = []
    for dataset in ("scifact", "norquad"):
        out.append(f"\n### {dataset}\n")
        out.append("| system | nDCG@10 | Recall@100 | MRR@10 | queries |")
        out.append("|---|---|---|---|---|")
        for config in ("dense", "sparse", "rrf60", "hybrid", "tuned", "rerank"):
            row = rows.get((dataset, config))
            if row is None:
                out.append(f"| ours: {config} | not run | | | |")
            elif "skipped" in row:
                out.append(f"| ours: {config} | n/a: {row['skipped']} | | | |")
            else:
                out.append(
                    f"| ours: {config} ({row['split']}) | {row['ndcg@10']:.4f} | {row['recall@100']:.4f} | "
                    f"{row['mrr@10']:.4f} | {row['queries']} |"
                )
        for name, ndcg, recall in PUBLISHED[dataset]:
            out.append(f"| published: {name} | {ndcg} | {recall} | – | |")
        tuned = tuned_path(dataset)
        if tuned.exists():
            report = json.loads(tuned.read_text(encoding="utf-8"))
            best = report["best"]
            start = report["offline"]["default"]
            start_fusion = "z-score" if start["k"] is None else f"RRF k {start['k']}"
            out.append(
                f"\nTuned on {report['split']} ({report['queries']} queries): {best['env']} → offline nDCG@10 "
                f"{best['ndcg@10']:.4f} (starting point {start_fusion}, weights "
                f"{start['weights']}: {start['ndcg@10']:.4f}; legs alone: dense "
                f"{report['offline']['dense_only']['ndcg@10']:.4f}, sparse {report['offline']['sparse_only']['ndcg@10']:.4f})."
            )
            if "api_check" in report:
                out.append(f"API check on {report['split']}: {report['api_check']}")
    return "\n".join(out)


def speed_tables(results_dir: Path) -> str:
    reports = sorted(results_dir.glob("*-speed-*.json"))
    if not reports:
        return "\n(no speed report)"
    return "\n".join(speed_table(json.loads(path.read_text(encoding="utf-8"))) for path in reports)


def speed_table(report: dict[str, Any]) -> str:
    out = [f"\nSpeed: `{report['command']}`, {report['date']}, {report['machine']}\n"]
    out.append("| docs in collection | docs/s (HTTP) | chunks/s (HTTP) | chunks | peak RSS MiB (both services) |")
    out.append("|---|---|---|---|---|")
    for stage in report["stages"]:
        ing = stage["ingest"]
        out.append(
            f"| {stage['docs_total']} (+{ing['docs']} this stage) | {ing['docs_per_s']:.2f} | {ing['chunks_per_s']:.2f} | "
            f"{ing['chunks']} | {ing['rss_peak_mib']:.0f} (start {ing['rss_start_mib']:.0f}) |"
        )
    raw = next((s["raw_embedding"] for s in report["stages"] if "raw_embedding" in s), None)
    if raw:
        out.append(f"\nRaw in-process embedding of {raw['chunks']} stored chunks, same run (chunks/s):\n")
        out.append(
            "| dense only | dense+sparse, one fused pass | dense+sparse, two passes | pipeline efficiency | fused / two passes |"
        )
        out.append("|---|---|---|---|---|")
        out.append(
            f"| {raw['dense_only']['chunks_per_s']} | {raw['dense+sparse_fused']['chunks_per_s']} | "
            f"{raw['dense+sparse_two_passes']['chunks_per_s']} | {raw['pipeline_efficiency']} | "
            f"{raw['fused_speedup_over_two_passes']} |"
        )
    out.append(f"\nQuery embedding in-process (ms): {report['query_embedding']}\n")
    out.append("| docs | mode | concurrency | p50 ms | p95 ms | p99 ms | req/s |")
    out.append("|---|---|---|---|---|---|---|")
    for stage in report["stages"]:
        for mode, levels in stage["search"].items():
            if mode == "rerank_server":
                continue
            for level, s in levels.items():
                out.append(
                    f"| {stage['docs_total']} | {mode} | {level[1:]} | {s['p50_ms']} | {s['p95_ms']} | {s['p99_ms']} | {s['rps']} |"
                )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    print("## Quality")
    print(quality_tables(args.results_dir))
    print("\n## Speed")
    print(speed_tables(args.results_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
