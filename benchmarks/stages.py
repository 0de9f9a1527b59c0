"""Where a hybrid search spends its time, stage by stage, in-process on a store a benchmark ingested.

    python -m benchmarks.stages --dataset scifact --work-dir benchmarks/.work-ml-5k-none

Each test query, with the variants of a stage timed side by side (interleaved, so a busy machine
slows them alike):

- query embedding: the fp32 dense model on one thread (QUERY_EMBEDDING_QUANTIZATION=none) and its
  int8 copy (the default), and the cosine between their vectors; the int8 copy also on a session
  with ONNX Runtime's SkipLayerNormalization fusion, which the query session leaves out (run
  first on alternate queries);
- each leg of the hybrid search alone, with the per-tenant IDF it is sent with and without it (the
  scores are compared too: over a tenant that is the whole collection they must be equal), and over
  the tenant plus an empty one (the same points and scores: for the sparse and BM25 legs, what a
  one-value tenant filter saves over a list, which the engine serves on another path; dense legs
  over several tenants search each tenant on its own);
- the batch of legs the pipeline sends;
- the read of the fused hits (payloads and cosines: a dense query over their ids).

The stack is not started: the retrieval app's lifespan opens the store and loads the models in
this process (so no other process may hold the store). Results go to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import shlex
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.beir import DEFAULT_DATA_DIR, REPO_ROOT, load_dataset
from benchmarks.quality import RESULTS_DIR, WORK_DIR, collection_for, machine, workspace


def summary(seconds: Sequence[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 3), "p95_ms": round(p95 * 1000, 3)}


async def timed(times: dict[str, list[float]], name: str, call: Callable[[], Awaitable[Any]]) -> Any:
    started = time.perf_counter()
    result = await call()
    times.setdefault(name, []).append(time.perf_counter() - started)
    return result


def timed_sync(times: dict[str, list[float]], name: str, call: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = call()
    times.setdefault(name, []).append(time.perf_counter() - started)
    return result


FUSED_SESSION = "embed int8 (1 thread), SkipLayerNorm fused"


def cosine_summary(cosines: Sequence[float]) -> dict[str, float | None]:
    return {
        "min": round(min(cosines), 4) if cosines else None,
        "mean": round(statistics.fmean(cosines), 4) if cosines else None,
    }


def default_session(embedder: Any) -> Any:
    """The int8 query copy on a session with fastembed's options alone (every ONNX Runtime fusion)."""
    from rag_runtime.embedding.query_int8 import fastembed_model_file, query_session

    model = embedder.query_dense.load_dir() / fastembed_model_file(embedder.query_dense.model_name)
    return query_session(model, 1, disabled=())


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    from qdrant_client import models

    from rag_runtime.embedding import ContractEmbedder
    from rag_runtime.embedding.fastembed_internals import replace_onnx_session
    from retrieval_agent.main import create_app
    from retrieval_agent.search.fusion import zscore_fuse
    from retrieval_agent.search.leg_weights import lexical_fields_for
    from retrieval_agent.search.query import fused_points_request, hybrid_legs, leg_requests
    from retrieval_agent.settings import Settings
    from shared_contract import load_settings

    store_path = workspace(args.dataset, args.work_dir).qdrant
    if not store_path.is_dir():
        raise SystemExit(f"no store at {store_path}: ingest one first (benchmarks.quality or benchmarks.speed)")
    settings = load_settings(
        Settings,
        api_key="stages-benchmark-key-0123456789abcdef",
        qdrant_uri=None,
        qdrant_path=store_path,
        enable_reranking=False,
        enable_query_generation=False,
        local_models_dir=Path(os.environ.get("LOCAL_MODELS_DIR", REPO_ROOT / ".cache" / "models")),
    )
    tenants = [collection_for(args.dataset)]
    with_empty_tenant = [*tenants, "stages-empty-tenant"]
    queries = list(load_dataset(args.dataset, "test", args.data_dir).split_queries().values())[: args.queries]
    fp32 = ContractEmbedder(settings, sparse=False, dense_threads=1)
    int8 = ContractEmbedder(settings, sparse=False, dense_threads=1, query_int8=True)
    await asyncio.to_thread(fp32.warm_up)
    await asyncio.to_thread(int8.warm_up)
    int8_fused = ContractEmbedder(settings, sparse=False, dense_threads=1, query_int8=True)
    await asyncio.to_thread(int8_fused.warm_up)
    replace_onnx_session(int8_fused.query_dense.model, await asyncio.to_thread(default_session, int8_fused))  # type: ignore[attr-defined]
    times: dict[str, list[float]] = {}
    cosines: list[float] = []
    fused_cosines: list[float] = []
    idf_legs = idf_same = 0
    listed_legs = listed_same = 0
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        search = app.state.search
        store = search.store
        capabilities = await store.capabilities()
        mix = await store.lexical_languages(tenants)
        params = search.fusion(10, mix, multilingual=capabilities.has_multilingual)
        fields = lexical_fields_for(mix, capabilities.lexical_fields)
        for index, text in enumerate(queries):
            full = timed_sync(times, "embed fp32 (1 thread)", partial(fp32.embed_query, text, with_sparse=False))
            int8_variants = [("embed int8 (1 thread)", int8), (FUSED_SESSION, int8_fused)]
            if index % 2:
                int8_variants.reverse()
            quantized_by_name = {
                name: timed_sync(times, name, partial(embedder.embed_query, text, with_sparse=False))
                for name, embedder in int8_variants
            }
            quantized = quantized_by_name["embed int8 (1 thread)"]
            cosines.append(float(np.dot(full.dense, quantized.dense)))  # both unit length
            fused_cosines.append(float(np.dot(full.dense, quantized_by_name[FUSED_SESSION].dense)))
            vectors = search.embedder.embed_query(text, with_sparse=search.embedder.sparse is not None)
            legs, listed = (
                hybrid_legs(
                    dense=vectors.dense,
                    sparse=vectors.sparse,
                    text=text,
                    lexical_fields=fields,
                    collection_names=names,
                    params=params,
                    sparse_idf=capabilities.sparse_idf,
                    live_key=capabilities.live_key,
                )
                for names in (tenants, with_empty_tenant)
            )
            if legs is None or listed is None:
                continue
            requests = leg_requests(legs)
            for request, listed_request in zip(requests, leg_requests(listed), strict=True):
                name = str(request.using or "bm25")
                # Alternate which variant runs first: the second one finds the query's postings warm.
                variants = [
                    (f"leg {name}", request),
                    (f"leg {name} over it and an empty tenant", listed_request),
                ]
                first, second = variants if index % 2 == 0 else variants[::-1]
                answers = {
                    first[0]: await timed(times, first[0], partial(store.query, first[1])),
                    second[0]: await timed(times, second[0], partial(store.query, second[1])),
                }
                scoped, over_two = answers[variants[0][0]], answers[variants[1][0]]
                listed_legs += 1
                listed_same += [(p.point_id, p.score) for p in scoped] == [(p.point_id, p.score) for p in over_two]
                if request.params is None:
                    continue
                unscoped_request = request.model_copy(update={"params": None})
                unscoped = await timed(times, f"leg {name} without IDF", partial(store.query, unscoped_request))
                idf_legs += 1
                idf_same += [(p.point_id, p.score) for p in scoped] == [(p.point_id, p.score) for p in unscoped]
            candidates = await timed(times, "legs batch", partial(store.query_batch, requests))
            fused = zscore_fuse(candidates, legs.weights, 10)
            if fused:
                read = fused_points_request(
                    vectors.dense,
                    [candidate.point_id for candidate in fused],
                    tenants,
                    live_key=capabilities.live_key,
                )
                await timed(times, "read of the fused hits", partial(store.query, read))
        chunks = await store.count(models.Filter(must=[]))
    return {
        "chunks_in_store": chunks,
        "queries": len(queries),
        "stages": {name: summary(values) for name, values in times.items()},
        "idf": {"legs_compared": idf_legs, "same_ranking_and_scores": idf_same},
        "with_an_empty_tenant": {"legs_compared": listed_legs, "same_ranking_and_scores": listed_same},
        "int8_vs_fp32_query_cosine": cosine_summary(cosines),
        "int8_skiplayernorm_fused_vs_fp32_query_cosine": cosine_summary(fused_cosines),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.stages", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--queries", type=int, default=150, help="test queries to run (default 150)")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    report = asyncio.run(measure(args))
    report = {
        "command": "python -m benchmarks.stages " + shlex.join(sys.argv[1:] if argv is None else list(argv)),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        **report,
    }
    print(f"{report['chunks_in_store']} chunks, {report['queries']} queries")
    for name, row in report["stages"].items():
        print(f"  {name:<48} p50 {row['p50_ms']:7.3f} ms  p95 {row['p95_ms']:7.3f} ms")
    cosine = report["int8_vs_fp32_query_cosine"]
    print(f"  int8 vs fp32 query vectors: cosine min {cosine['min']}, mean {cosine['mean']}")
    cosine = report["int8_skiplayernorm_fused_vs_fp32_query_cosine"]
    print(f"  int8 (SkipLayerNorm fused) vs fp32 query vectors: cosine min {cosine['min']}, mean {cosine['mean']}")
    idf = report["idf"]
    print(f"  legs with and without per-tenant IDF: {idf['same_ranking_and_scores']}/{idf['legs_compared']} identical")
    listed = report["with_an_empty_tenant"]
    print(
        f"  legs over the tenant and over it plus an empty one: "
        f"{listed['same_ranking_and_scores']}/{listed['legs_compared']} identical"
    )
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"{stamp}-stages-{args.dataset}.json"
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
