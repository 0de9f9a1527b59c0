"""Tune hybrid fusion (leg weights, prefetch depth; RRF k) on a tuning split, never on test.

    python -m benchmarks.tune --dataset scifact            # tunes on train; writes benchmarks/tuned/scifact-zscore.json
    python -m benchmarks.tune --joint scifact,norquad      # one point for both; writes benchmarks/tuned/joint-zscore.json
    python -m benchmarks.tune --fusion rrf ...             # Qdrant's weighted RRF instead (tuned/<name>.json)

Every leg (dense, BM42 sparse, one BM25 leg per lexical language field present in the tenant) is
fetched once per query, in-process, from the dataset's store (the same engine, query vectors, tenant
filter and per-tenant IDF the retrieval agent uses), with the legs' raw scores, deep enough for the
largest prefetch; every grid point is then fused offline.

* ``--fusion zscore`` (the default, the service's ``HYBRID_FUSION=zscore``): the agent's own
  z-score fusion (``retrieval_agent.search.fusion``; :func:`zscore_fuse` here over these legs).
  Per leg with weight > 0, over its top ``SEARCH_K * multiplier`` results: ``z' = (score - min) /
  std`` (population std; the agent's no-spread value when one result or all equal; 0 where the leg
  did not return a point); fused ``sum(weight * z')``, best first, ties in first-seen order (legs
  with weight > 0 in order dense, sparse, lexical, each best first). The grid is vectorised: per
  query and multiplier one (candidates x 3) matrix of z', then one weighted sum and sort per point.
  Its ranking equals the agent's bit for bit. Weights only matter up to a common scale, so the
  lexical weight is fixed at 1 (or 0, with dense at 1); no k.
* ``--fusion rrf``: Qdrant's weighted-RRF formula (:func:`qdrant_rrf`, positions only), grid over
  k, weights and multiplier.

The top ``SEARCH_K`` chunks are mapped to documents by their best chunk. The best point and the
defaults are then run through the real /search API on the tuning split to check the offline fusion
agrees with it (``--no-verify`` skips that). ``--joint`` reads the per-dataset JSON of the same
fusion and picks one point for all of them. The `tuned` row of benchmarks.quality reads the JSON
this writes (``benchmarks.configs.tuned_path``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.beir import DEFAULT_DATA_DIR, REPO_ROOT, load_dataset
from benchmarks.configs import CONFIG_ENV, TUNED_DIR, tuned_path
from benchmarks.ingest import file_id_map, read_done
from benchmarks.metrics import Run, evaluate
from benchmarks.quality import (
    SEARCH_K,
    TUNING_SPLIT,
    WORK_DIR,
    collection_for,
    hits_to_run,
    machine,
    search_all,
    workspace,
)
from benchmarks.stack import running_stack

RRF_KS = (2, 5, 10, 30, 60)
# Z-score fusion ranks the same under any common scale of the weights: BM25's weight is fixed at 1
# (or 0, with dense at 1), the others relative to it.
ZSCORE_WEIGHTS = tuple(
    [
        (dense, sparse, 1.0)
        for dense in (0.0, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 2.0)
        for sparse in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2)
    ]
    + [(1.0, sparse, 0.0) for sparse in (0.2, 0.4, 0.6, 0.8, 1.0, 1.2)]
)
ZSCORE_DEFAULT_POINT = (None, (1.0, 1.0, 1.0), 2)
# (dense, sparse BM42, lexical BM25) weights.
WEIGHTS = tuple(
    (dense, sparse, lexical)
    for dense in (0.0, 0.25, 0.5, 0.75, 1.0)
    for sparse in (0.0, 0.25, 0.5, 1.0)
    for lexical in (0.0, 0.5, 1.0, 1.5)
    if dense + sparse + lexical > 0
)
MULTIPLIERS = (2, 4, 8)
DEFAULT_POINT = (60, (1.0, 1.0, 1.0), 4)

# A leg: (point id, file id, raw score), best first.
Leg = list[tuple[str, str, float]]


@dataclass(frozen=True)
class Legs:
    dense: Leg
    sparse: Leg
    lexical: Leg  # BM25 over the tenant's lexical language fields, merged by score as the agent does


def qdrant_rrf(legs: Sequence[Leg], weights: Sequence[float], k: int, limit: int) -> list[tuple[str, str, float]]:
    """Qdrant's weighted RRF (qdrant_client.hybrid.fusion): 1 / ((pos + 1) / w + k - 1), 0 for w <= 0."""
    scores: dict[str, float] = {}
    file_of: dict[str, str] = {}
    for leg, weight in zip(legs, weights, strict=True):
        for pos, (point_id, file_id, _) in enumerate(leg):
            contribution = 0.0 if weight <= 0 else 1.0 / ((pos + 1.0) / weight + k - 1.0)
            scores[point_id] = scores.get(point_id, 0.0) + contribution
            file_of.setdefault(point_id, file_id)
    ordered = sorted(scores.items(), key=lambda item: item[1], reverse=True)[:limit]
    return [(point_id, file_of[point_id], score) for point_id, score in ordered]


def zscore_fuse(legs: Sequence[Leg], weights: Sequence[float], limit: int) -> list[tuple[str, str, float]]:
    """The agent's z-score fusion (``retrieval_agent.search.fusion.zscore_fuse``) over these legs.

    Legs with weight <= 0 are not sent, as the agent does not send them; the others are fused by
    ``sum(weight * z')`` with ``z' = (score - min) / std`` per leg, ties in first-seen order. The
    reference for :func:`zscore_run`, which ranks the same, vectorised over a grid.
    """
    from rag_runtime.store import PointRecord
    from retrieval_agent.search.fusion import zscore_fuse as agent_zscore_fuse

    sent = [(leg, weight) for leg, weight in zip(legs, weights, strict=True) if weight > 0]
    file_of: dict[str, str] = {}
    for leg, _ in sent:
        for point_id, file_id, _ in leg:
            file_of.setdefault(point_id, file_id)
    fused = agent_zscore_fuse(
        [[PointRecord(point_id=point_id, score=score) for point_id, _, score in leg] for leg, _ in sent],
        [weight for _, weight in sent],
        limit,
    )
    return [(candidate.point_id, file_of[candidate.point_id], candidate.score) for candidate in fused]


def fused_run(legs: Legs, k: int, weights: tuple[float, float, float], multiplier: int, id_map: dict[str, str]) -> Run:
    depth = SEARCH_K * multiplier
    fused = qdrant_rrf([legs.dense[:depth], legs.sparse[:depth], legs.lexical[:depth]], weights, k, SEARCH_K)
    run: dict[str, float] = {}
    for _, file_id, score in fused:
        doc_id = id_map.get(file_id)
        if doc_id is not None and score > run.get(doc_id, -1.0):
            run[doc_id] = score
    return run


@dataclass(frozen=True)
class ZscoreCandidates:
    """One query's candidates at one depth: each leg's standardised scores, as the agent fuses them."""

    z: np.ndarray  # (candidates, 3): dense, sparse, lexical; 0 where the leg did not return it
    # (candidates, 3): leg * (depth + 1) + position in the leg, inf where the leg did not return it.
    # The smallest over the legs sent is where the agent first sees a candidate (its tie order).
    seen: np.ndarray
    files: list[str]


def zscore_candidates(legs: Legs, depth: int) -> ZscoreCandidates:
    """Candidates in first-seen order (dense, sparse, lexical; each best first), standardised per leg."""
    from retrieval_agent.search.fusion import standardised

    position: dict[str, int] = {}
    files: list[str] = []
    tops = [legs.dense[:depth], legs.sparse[:depth], legs.lexical[:depth]]
    for top in tops:
        for point_id, file_id, _ in top:
            if point_id not in position:
                position[point_id] = len(files)
                files.append(file_id)
    z = np.zeros((len(files), 3))
    seen = np.full((len(files), 3), np.inf)
    for column, top in enumerate(tops):
        for pos, ((point_id, _, _), value) in enumerate(
            zip(top, standardised([score for _, _, score in top])[0], strict=True)
        ):
            z[position[point_id], column] = value
            seen[position[point_id], column] = column * (depth + 1) + pos
    return ZscoreCandidates(z=z, seen=seen, files=files)


def zscore_run(candidates: ZscoreCandidates, weights: tuple[float, float, float], id_map: dict[str, str]) -> Run:
    """:func:`zscore_fuse` vectorised: weighted sum, legs with weight 0 not sent, ties in first-seen
    order over the legs sent; the top SEARCH_K chunks mapped to documents by their best chunk."""
    sent = [column for column, weight in enumerate(weights) if weight > 0]
    if not sent:
        return {}
    # Leg by leg, as the agent adds them up (a matrix product may round differently): the same floats.
    z = candidates.z
    w = [weight if weight > 0 else 0.0 for weight in weights]
    scores = z[:, 0] * w[0] + z[:, 1] * w[1] + z[:, 2] * w[2]
    first_seen = candidates.seen[:, sent].min(axis=1)
    kept = np.nonzero(np.isfinite(first_seen))[0]
    order = kept[np.lexsort((first_seen[kept], -scores[kept]))][:SEARCH_K]
    run: dict[str, float] = {}
    for index in order:
        doc_id = id_map.get(candidates.files[index])
        if doc_id is not None and doc_id not in run:
            run[doc_id] = float(scores[index])
    return run


def leg_run(leg: Leg, id_map: dict[str, str]) -> Run:
    run: dict[str, float] = {}
    for pos, (_, file_id, _) in enumerate(leg[:SEARCH_K]):
        doc_id = id_map.get(file_id)
        if doc_id is not None:
            run.setdefault(doc_id, -float(pos))
    return run


def fetch_legs(qdrant_path: Path, dataset: str, queries: dict[str, str], depth: int) -> dict[str, Legs]:
    """Every leg for every query, in-process, as the retrieval agent builds them."""
    return asyncio.run(_fetch_legs(qdrant_path, dataset, queries, depth))


async def _fetch_legs(qdrant_path: Path, dataset: str, queries: dict[str, str], depth: int) -> dict[str, Legs]:
    from qdrant_client import models

    from rag_runtime.embedding import ContractEmbedder
    from rag_runtime.lexical import lexical_fields
    from rag_runtime.store import close_store, open_store, tenant_filter
    from retrieval_agent.search.query import lexical_prefetch
    from shared_contract import DENSE_VECTOR, SPARSE_VECTOR, ContractSettings, MetaKey, load_settings

    settings = load_settings(
        ContractSettings,
        qdrant_uri=None,
        qdrant_path=qdrant_path,
        local_models_dir=Path(os.environ.get("LOCAL_MODELS_DIR", REPO_ROOT / ".cache" / "models")),
    )
    embedder = ContractEmbedder(settings)
    embedder.warm_up()
    store = open_store(settings)
    flt = tenant_filter([collection_for(dataset)])
    per_tenant_idf = models.SearchParams(idf=models.IdfCorpusParams(corpus=flt))
    payload = [f"meta.{MetaKey.FILE_ID}"]

    async def leg(query: Any, using: str | None, params: models.SearchParams | None = None) -> Leg:
        if isinstance(query, models.Prefetch):  # the merged BM25 leg: run its prefetch as the request
            request = models.QueryRequest(
                prefetch=query.prefetch,
                query=query.query,
                using=query.using,
                filter=query.filter,
                params=query.params,
                limit=depth,
                with_payload=payload,
            )
        else:
            request = models.QueryRequest(
                query=query, using=using, filter=flt, params=params, limit=depth, with_payload=payload
            )
        points = await store.query(request)
        return [
            (p.point_id, str((p.payload.get("meta") or {}).get(MetaKey.FILE_ID, "")), float(p.score)) for p in points
        ]

    legs: dict[str, Legs] = {}
    started = time.perf_counter()
    try:
        languages = [str(hit.value) for hit in await store.facet(f"meta.{MetaKey.LEXICAL_LANGUAGE}", flt, limit=50)]
        fields = lexical_fields(languages)
        print(f"  lexical fields in the tenant: {fields}", flush=True)
        for i, (qid, text) in enumerate(queries.items(), start=1):
            vectors = embedder.embed_query(text, with_sparse=True)
            assert vectors.sparse is not None
            sparse = models.SparseVector(indices=list(vectors.sparse.indices), values=list(vectors.sparse.values))
            legs[qid] = Legs(
                dense=await leg(vectors.dense, DENSE_VECTOR),
                sparse=await leg(sparse, SPARSE_VECTOR, per_tenant_idf),
                lexical=await leg(
                    lexical_prefetch(models.TextQuery(text=text), fields, flt, per_tenant_idf, depth), None
                ),
            )
            if i % 200 == 0:
                print(
                    f"  legs fetched for {i}/{len(queries)} queries ({time.perf_counter() - started:.0f}s)", flush=True
                )
    finally:
        await close_store(store)
    return legs


def point_env(k: int | None, weights: tuple[float, float, float], multiplier: int) -> dict[str, str]:
    """A grid point as the agent's settings: an RRF point has a k, a z-score point none."""
    env = {"HYBRID_FUSION": "zscore"} if k is None else {"HYBRID_FUSION": "rrf", "HYBRID_RRF_K": str(k)}
    return {
        **env,
        "HYBRID_DENSE_WEIGHT": str(weights[0]),
        "HYBRID_SPARSE_WEIGHT": str(weights[1]),
        "HYBRID_LEXICAL_WEIGHT": str(weights[2]),
        "HYBRID_PREFETCH_MULTIPLIER": str(multiplier),
    }


def tune(args: argparse.Namespace) -> dict[str, Any]:
    split = args.split or TUNING_SPLIT[args.dataset]
    if split == "test":
        raise SystemExit("refusing to tune on the test split")
    dataset = load_dataset(args.dataset, split, args.data_dir)
    queries = dataset.split_queries()
    if args.limit_queries:
        queries = dict(list(queries.items())[: args.limit_queries])
    qrels = {qid: dataset.qrels[qid] for qid in queries}
    ws = workspace(args.dataset, args.work_dir)
    done = read_done(ws.done)
    id_map = {fid: doc for fid, doc in file_id_map(args.dataset, dataset.corpus).items() if fid in done}
    if len(id_map) < len(dataset.corpus):
        print(f"  note: {len(id_map)}/{len(dataset.corpus)} docs ingested in {ws.qdrant}", flush=True)
    print(f"{args.dataset}/{split}: fetching legs for {len(queries)} queries (depth {SEARCH_K * max(MULTIPLIERS)})")
    started = time.perf_counter()
    legs = fetch_legs(ws.qdrant, args.dataset, queries, SEARCH_K * max(MULTIPLIERS))
    fetch_s = time.perf_counter() - started

    grid: list[dict[str, Any]] = []
    if args.fusion == "rrf":
        default_point: tuple[int | None, tuple[float, float, float], int] = DEFAULT_POINT
        for k, weights, multiplier in itertools.product(RRF_KS, WEIGHTS, MULTIPLIERS):
            runs = {qid: fused_run(legs[qid], k, weights, multiplier, id_map) for qid in queries}
            summary, _ = evaluate(runs, qrels)
            grid.append({"k": k, "weights": list(weights), "multiplier": multiplier, **summary.as_dict()})
    else:
        default_point = ZSCORE_DEFAULT_POINT
        for multiplier in MULTIPLIERS:
            candidates = {qid: zscore_candidates(legs[qid], SEARCH_K * multiplier) for qid in queries}
            for weights in (*ZSCORE_WEIGHTS, ZSCORE_DEFAULT_POINT[1]):
                runs = {qid: zscore_run(candidates[qid], weights, id_map) for qid in queries}
                summary, _ = evaluate(runs, qrels)
                grid.append({"k": None, "weights": list(weights), "multiplier": multiplier, **summary.as_dict()})

    # Best nDCG@10; ties go to the point nearest the defaults (fewest changed settings).
    def changed(point: dict[str, Any]) -> int:
        return sum(
            [
                point["k"] != default_point[0],
                tuple(point["weights"]) != default_point[1],
                point["multiplier"] != default_point[2],
            ]
        )

    best = max(grid, key=lambda p: (round(p["ndcg@10"], 6), -changed(p), p["recall@100"]))
    default = next(
        p
        for p in grid
        if (p["k"], tuple(p["weights"]), p["multiplier"]) == (default_point[0], default_point[1], default_point[2])
    )
    dense_only, _ = evaluate({q: leg_run(legs[q].dense, id_map) for q in queries}, qrels)
    sparse_only, _ = evaluate({q: leg_run(legs[q].sparse, id_map) for q in queries}, qrels)
    lexical_only = next(
        p
        for p in grid
        if tuple(p["weights"]) == (0.0, 0.0, 1.0) and p["k"] == default_point[0] and p["multiplier"] == 2
    )
    best_env = point_env(best["k"], (best["weights"][0], best["weights"][1], best["weights"][2]), best["multiplier"])
    report: dict[str, Any] = {
        "dataset": args.dataset,
        "fusion": args.fusion,
        "split": split,
        "objective": "ndcg@10",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "queries": len(queries),
        "leg_fetch_s": round(fetch_s, 1),
        "offline": {
            "dense_only": dense_only.as_dict(),
            "sparse_only": sparse_only.as_dict(),
            "lexical_only": {
                key: value for key, value in lexical_only.items() if key not in ("k", "weights", "multiplier")
            },
            "default": default,
        },
        "best": {**best, "env": best_env},
        "grid": sorted(grid, key=lambda p: -p["ndcg@10"]),
    }
    print(
        f"  offline dense {dense_only.ndcg_10:.4f}  sparse {sparse_only.ndcg_10:.4f}  "
        f"lexical {lexical_only['ndcg@10']:.4f}  default hybrid {default['ndcg@10']:.4f}"
    )
    print(f"  best {best_env} -> nDCG@10 {best['ndcg@10']:.4f} R@100 {best['recall@100']:.4f}")
    if args.verify:
        report["api_check"] = verify(args, dataset.name, queries, qrels, id_map, best_env)
    return report


def verify(
    args: argparse.Namespace,
    dataset: str,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    id_map: dict[str, str],
    best_env: dict[str, str],
) -> dict[str, Any]:
    """The default and best points through the real /search API on the tuning split."""
    ws = workspace(dataset, args.work_dir)
    checks: dict[str, Any] = {}
    for name, env in (("default", CONFIG_ENV["hybrid"]), ("best", {**CONFIG_ENV["hybrid"], **best_env})):
        with running_stack(ws.qdrant, env, log_path=ws.log) as stack:
            results = asyncio.run(search_all(stack, queries, collection_for(dataset), 4))
        runs = {qid: hits_to_run(result, id_map)[0] for qid, result in results.items()}
        summary, _ = evaluate(runs, qrels)
        checks[name] = summary.as_dict()
        print(f"  API {name}: nDCG@10 {summary.ndcg_10:.4f} R@100 {summary.recall_100:.4f}", flush=True)
    return checks


async def language_mix(qdrant_path: Path, dataset: str) -> dict[str, int]:
    """``meta.lexical_language`` -> chunks in the dataset's tenant, as the agent's facet sees it."""
    from rag_runtime.store import close_store, open_store, tenant_filter
    from shared_contract import ContractSettings, MetaKey, load_settings

    store = open_store(load_settings(ContractSettings, qdrant_uri=None, qdrant_path=qdrant_path))
    try:
        hits = await store.facet(f"meta.{MetaKey.LEXICAL_LANGUAGE}", tenant_filter([collection_for(dataset)]), limit=50)
    finally:
        await close_store(store)
    return {str(hit.value): hit.count for hit in hits}


def joint(datasets: Sequence[str], work_dir: Path, fusion: str = "zscore") -> dict[str, Any]:
    """One default for every language, chosen on the tuning splits only (no test split is looked at).

    The dense leg has two weights: one over chunks in the dense model's languages, one over the
    rest (``HYBRID_DENSE_WEIGHT_OTHER_LANGUAGES``). A dataset whose chunks are mostly in the dense
    model's languages is scored with the first, the others with the second; the point with the
    best mean nDCG@10 over the datasets wins.
    """
    from shared_contract.embedding_models import dense_model_languages
    from shared_contract.settings import DEFAULT_DENSE_MODEL

    model_languages = dense_model_languages(DEFAULT_DENSE_MODEL)
    grids = {
        name: {
            (p["k"], tuple(p["weights"]), p["multiplier"]): p["ndcg@10"]
            for p in json.loads(tuned_path(name, fusion).read_text(encoding="utf-8"))["grid"]
        }
        for name in datasets
    }
    covered: dict[str, bool] = {}
    for name in datasets:
        mix = asyncio.run(language_mix(workspace(name, work_dir).qdrant, name))
        share = sum(n for code, n in mix.items() if model_languages is None or code in model_languages) / max(
            1, sum(mix.values())
        )
        covered[name] = share >= 0.5
        print(f"  {name}: language mix {mix}, dense model covers {share:.0%}")
    dense_values = sorted({weights[0] for _, weights, _ in next(iter(grids.values()))})
    rest = {(k, weights[1:], multiplier) for grid in grids.values() for k, weights, multiplier in grid}
    candidates: list[dict[str, Any]] = []
    for (k, (sparse, lexical), multiplier), own, other in itertools.product(
        sorted(rest, key=lambda point: (point[0] or 0, point[1], point[2])), dense_values, dense_values
    ):
        per_dataset = {}
        for name, grid in grids.items():
            dense = own if covered[name] else other
            score = grid.get((k, (dense, sparse, lexical), multiplier))
            if score is None:
                break
            per_dataset[name] = score
        else:
            mean = sum(per_dataset.values()) / len(per_dataset)
            candidates.append(
                {
                    "k": k,
                    "dense": own,
                    "dense_other": other,
                    "sparse": sparse,
                    "lexical": lexical,
                    "multiplier": multiplier,
                    "mean": round(mean, 4),
                    **per_dataset,
                }
            )
    # Best mean; ties go to the most even point, then to the lower dense weight for other languages.
    candidates.sort(key=lambda c: (-c["mean"], -min(c[name] for name in datasets), c["dense_other"]))
    best = candidates[0]
    env = point_env(best["k"], (best["dense"], best["sparse"], best["lexical"]), best["multiplier"])
    env["HYBRID_DENSE_WEIGHT_OTHER_LANGUAGES"] = str(best["dense_other"])
    report: dict[str, Any] = {
        "datasets": list(datasets),
        "fusion": fusion,
        "objective": "mean ndcg@10 over the tuning splits",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "dense_model_covers": covered,
        "best": {**best, "env": env},
        "top10": candidates[:10],
    }
    print(f"  joint best {env} -> mean {best['mean']:.4f} " + " ".join(f"{n} {best[n]:.4f}" for n in datasets))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.tune", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="scifact", choices=sorted(TUNING_SPLIT))
    parser.add_argument("--split", default=None, help="tuning split (default: scifact train, norquad dev)")
    parser.add_argument("--limit-queries", type=int, default=None)
    parser.add_argument("--no-verify", dest="verify", action="store_false", help="skip the API check")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR)
    parser.add_argument("--out", type=Path, default=None, help=f"default {TUNED_DIR}/<dataset>.json")
    parser.add_argument(
        "--joint",
        default=None,
        help="comma list of tuned datasets: pick one point for all of them (writes tuned/joint-zscore.json)",
    )
    parser.add_argument("--fusion", choices=("zscore", "rrf"), default="zscore", help="the fusion to tune")
    args = parser.parse_args(argv)
    if args.joint:
        report = joint([name.strip() for name in args.joint.split(",") if name.strip()], args.work_dir, args.fusion)
        out = args.out or tuned_path("joint", args.fusion)
        out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {out}")
        return 0
    report = tune(args)
    out = args.out or tuned_path(args.dataset, args.fusion)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
