"""What the agentic loop costs besides its model: /search p50, agentic vs linear, against an instant model.

    python -m benchmarks.agent_overhead                          # SciFact store of benchmarks.speed if present
    python -m benchmarks.agent_overhead --requests 60 --concurrency 1,4

The model is scripted and instant (a local OpenAI-compatible server in its own process: the first turn
calls ``retrieve`` with the question, the second answers DONE), so agentic minus linear is the
loop's own cost: two model round trips over loopback (HTTP, the OpenAI SDK, PydanticAI's graph),
the tool bookkeeping and the previews. With a real model, its latency is added on top and is the
only cost left. The model time the service measured itself (``agent_model_seconds``) is reported
beside it.

The store: benchmarks/.work/scifact (written by benchmarks.speed) when present, else the committed
40-doc SciFact sample ingested into benchmarks/.work/agent-overhead. Reranking is off in both modes
and query generation is off in linear mode, so both run the same hybrid search per query.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchmarks.beir import DEFAULT_DATA_DIR, load_dataset
from benchmarks.client import ServiceClient
from benchmarks.quality import RESULTS_DIR, WORK_DIR, collection_for, machine
from benchmarks.scripted_model import scripted_model
from benchmarks.speed import load_test
from benchmarks.stack import Stack, running_stack

SAMPLE_DIR = Path(__file__).resolve().parent / "tests" / "fixtures" / "scifact-sample"
_QUERY_LINE = re.compile(r"^- (.+)$", re.MULTILINE)


def _completion(message: dict[str, Any], finish_reason: str) -> bytes:
    body = {
        "id": "chatcmpl-instant",
        "object": "chat.completion",
        "created": 0,
        "model": "instant",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
        "usage": {"prompt_tokens": 300, "completion_tokens": 12, "total_tokens": 312},
    }
    return json.dumps(body).encode()


def instant_reply(body: dict[str, Any]) -> bytes:
    """First turn: ``retrieve`` with the question (one query, as linear mode searches); then DONE."""
    if any(message.get("role") == "assistant" for message in body.get("messages", [])):
        return _completion({"role": "assistant", "content": "DONE"}, "stop")
    prompt = next((m.get("content") for m in body.get("messages", []) if m.get("role") == "user"), "")
    found = _QUERY_LINE.search(prompt if isinstance(prompt, str) else "")
    question = found.group(1) if found else "query"
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": "retrieve", "arguments": json.dumps({"queries": [question], "filters": None})},
    }
    return _completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")


@contextmanager
def instant_model() -> Iterator[str]:
    """The scripted model (:func:`instant_reply`) in its own process; yields its /v1 base URL."""
    with scripted_model(instant_reply) as url:
        yield url


def service_counters(stack: Stack) -> dict[str, float]:
    """``agent_model_seconds`` (sum, count) and the process's CPU seconds, from the service's /metrics."""
    text = httpx.get(
        f"{stack.retrieval_url}/metrics", headers={"Authorization": f"Bearer {stack.retrieval_key}"}, timeout=10
    ).text
    values = dict.fromkeys(
        (
            "agent_model_seconds_sum",
            "agent_model_seconds_count",
            "process_cpu_seconds_total",
            "search_duration_seconds_count",
        ),
        0.0,
    )
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in values:
            values[name] = float(value)
    return values


async def ingest_sample(stack: Stack, collection: str) -> None:
    dataset = load_dataset("scifact", "test", SAMPLE_DIR)
    async with ServiceClient(
        stack.ingestion_url, stack.retrieval_url, stack.ingestion_key, stack.retrieval_key
    ) as client:
        for doc in dataset.corpus:
            await client.ingest(
                file_id=f"scifact-{doc.doc_id}",
                filename=f"{doc.doc_id}.txt",
                content=f"{doc.title}\n\n{doc.text}".encode(),
                collection_name=collection,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100, help="timed searches per mode and concurrency")
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    levels = [int(part) for part in args.concurrency.split(",") if part.strip()]

    scifact = args.work_dir / "scifact"
    collection = collection_for("scifact")
    if (scifact / "ingested.tsv").exists():
        store, sample = scifact / "qdrant", False
        queries = list(load_dataset("scifact", "test", args.data_dir).split_queries().values())
    else:
        store, sample = args.work_dir / "agent-overhead" / "qdrant", True
        queries = list(load_dataset("scifact", "test", SAMPLE_DIR).split_queries().values())
    common = {"ENABLE_RERANKING": "false", "ENABLE_QUERY_GENERATION": "false", "ENABLE_HYBRID_SEARCH": "true"}
    report: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "store": str(store),
        "requests": args.requests,
        "queries": len(queries),
        "modes": {},
    }
    with instant_model() as model_url:
        for mode in ("linear", "agentic"):
            env = dict(common)
            if mode == "agentic":
                env.update(
                    {
                        "ENABLE_AGENTIC_RAG": "true",
                        "AGENT_API_BASE_URL": model_url,
                        "AGENT_API_KEY": "instant",
                        "AGENT_MODEL": "instant",
                    }
                )
            with running_stack(store, env, log_path=store.parent / "agent-overhead.log") as stack:
                if sample and mode == "linear":
                    asyncio.run(ingest_sample(stack, collection))
                rows: dict[str, Any] = {}
                for level in levels:
                    before = service_counters(stack)
                    summary = asyncio.run(load_test(stack, collection, queries, level, args.requests))
                    after = service_counters(stack)
                    delta = {name: after[name] - before[name] for name in after}
                    # Over every search since the last reading (the 5 warm-ups included).
                    searches = delta["search_duration_seconds_count"] or 1.0
                    # The `rag dev` process's CPU (all threads: the query embedder's too) per search.
                    summary["service_cpu_ms_per_search"] = round(
                        delta["process_cpu_seconds_total"] / searches * 1000, 2
                    )
                    if mode == "agentic" and delta["agent_model_seconds_count"]:
                        summary["model_mean_ms"] = round(
                            delta["agent_model_seconds_sum"] / delta["agent_model_seconds_count"] * 1000, 2
                        )
                    rows[f"c{level}"] = summary
                    print(f"{mode:8s} c={level}: {summary}", flush=True)
                report["modes"][mode] = rows
    for level in levels:
        key = f"c{level}"
        linear, agentic = report["modes"]["linear"][key], report["modes"]["agentic"][key]
        report.setdefault("overhead", {})[key] = {
            "p50_ms": round(agentic["p50_ms"] - linear["p50_ms"], 2),
            "ratio": round(agentic["p50_ms"] / linear["p50_ms"], 2) if linear["p50_ms"] else None,
        }
    print(json.dumps(report["overhead"], indent=2))
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.results_dir / f"{stamp}-agent-overhead.json"
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
