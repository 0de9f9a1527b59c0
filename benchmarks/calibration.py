"""Fit and check the calibrated relevance that /search returns in ``distances``.

    python -m benchmarks.calibration --fit      # Platt coefficients: SciFact train, NorQuAD dev
    python -m benchmarks.calibration --report   # SciFact test and NorQuAD test: error of the defaults

Both run the retrieval agent's own pipeline in-process on the embedded stores that
``python -m benchmarks.quality`` ingested (benchmarks/.work/<dataset>/qdrant; run that first).
A hit is labelled relevant when its document is judged relevant for the query. ``--fit`` writes
benchmarks/tuned/calibration.json and prints RELEVANCE_CALIBRATION; ``--report`` prints, per
dataset and model, the Brier score and the expected calibration error (ECE, 10 equal-width bins)
of the relevance the service returns, beside the raw scores it returned before (clipped to [0, 1]).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.beir import load_dataset
from benchmarks.ingest import file_id_map, read_done
from benchmarks.quality import WORK_DIR, collection_for, workspace
from retrieval_agent.main import create_app
from retrieval_agent.metrics import SearchPath
from retrieval_agent.relevance_models import ModelName
from retrieval_agent.search.pipeline import LinearSearch
from retrieval_agent.search.postprocess import Hit
from retrieval_agent.settings import Settings

BENCH_DIR = Path(__file__).resolve().parent
OUT = BENCH_DIR / "tuned" / "calibration.json"
K = 10
BENCH_KEY = "calibration-benchmark-key-0123456789abcdef"


@dataclass(frozen=True, slots=True)
class Sample:
    """One returned hit: its features and whether its document is relevant."""

    path: SearchPath
    model: ModelName
    cosine: float | None
    fused: float | None
    raw: float
    relevance: float
    relevant: bool


def fit_platt(features: np.ndarray, labels: np.ndarray, *, l2: float = 1e-3, steps: int = 50) -> list[float]:
    """Logistic regression by Newton's method (IRLS); returns [intercept, *weights]."""
    design = np.hstack([np.ones((features.shape[0], 1)), features])
    weights = np.zeros(design.shape[1])
    for _ in range(steps):
        probability = 1.0 / (1.0 + np.exp(-(design @ weights)))
        gradient = design.T @ (probability - labels) + l2 * weights
        hessian = (design * (probability * (1 - probability))[:, None]).T @ design + l2 * np.eye(design.shape[1])
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if float(np.max(np.abs(step))) < 1e-9:
            break
    return [float(value) for value in weights]


def brier(probabilities: Sequence[float], labels: Sequence[bool]) -> float:
    return float(np.mean([(p - float(y)) ** 2 for p, y in zip(probabilities, labels, strict=True)]))


def ece(probabilities: Sequence[float], labels: Sequence[bool], bins: int = 10) -> float:
    """Expected calibration error: mean |accuracy - confidence| over equal-width bins, weighted by size."""
    total = len(probabilities)
    error = 0.0
    for index in range(bins):
        low, high = index / bins, (index + 1) / bins
        members = [
            (p, y)
            for p, y in zip(probabilities, labels, strict=True)
            if low <= p < high or (index == bins - 1 and p == 1)
        ]
        if members:
            confidence = sum(p for p, _ in members) / len(members)
            accuracy = sum(float(y) for _, y in members) / len(members)
            error += len(members) / total * abs(accuracy - confidence)
    return error


def reliability(probabilities: Sequence[float], labels: Sequence[bool], bins: int = 5) -> list[dict[str, float]]:
    rows = []
    for index in range(bins):
        low, high = index / bins, (index + 1) / bins
        members = [
            (p, y) for p, y in zip(probabilities, labels, strict=True) if low <= p < high or (high == 1 and p == 1)
        ]
        if members:
            rows.append(
                {
                    "bin": low,
                    "hits": len(members),
                    "mean_relevance": sum(p for p, _ in members) / len(members),
                    "share_relevant": sum(float(y) for _, y in members) / len(members),
                }
            )
    return rows


async def collect(
    dataset_name: str, split: str, env: dict[str, Any], paths: Sequence[SearchPath], work_dir: Path = WORK_DIR
) -> list[Sample]:
    """Run every judged query of the split through the pipeline; one sample per returned hit."""
    dataset = load_dataset(dataset_name, split)
    space = workspace(dataset_name, work_dir)
    if not space.qdrant.exists():
        raise SystemExit(
            f"{space.qdrant} is missing: run `python -m benchmarks.quality --dataset {dataset_name}"
            f" --work-dir {work_dir}` first"
        )
    done = read_done(space.done)
    id_map = {fid: doc for fid, doc in file_id_map(dataset_name, dataset.corpus).items() if fid in done}
    tenant = collection_for(dataset_name)
    samples: list[Sample] = []
    for path in paths:
        settings = Settings(
            api_key=BENCH_KEY,
            qdrant_path=str(space.qdrant),
            enable_reranking=False,
            enable_query_generation=False,
            enable_hybrid_search=path != "dense",
            **env,
        )
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            search: LinearSearch = app.state.search
            for qid, text in dataset.split_queries().items():
                relevant = {doc for doc, grade in dataset.qrels[qid].items() if grade > 0}
                if path == "bm25_fallback":
                    # The last-resort path needs a collection without sparse or text indexes: call it directly.
                    retrieved = await search._bm25_fallback(text, [tenant], K)
                    hits: list[Hit] = retrieved.hits
                else:
                    outcome = await search.search(queries=[text], messages=None, collection_names=[tenant], k=K)
                    hits = outcome.result_sets[0]
                for hit in hits:
                    doc = id_map.get(str(hit.meta.get("file_id")))
                    samples.append(
                        Sample(
                            path=path,
                            model=search.calibrator.model_for(hit, path),
                            cosine=hit.cosine,
                            fused=None if path == "dense" else hit.score * search.fused_scale(path),
                            raw=hit.score,
                            relevance=hit.relevance,
                            relevant=doc in relevant,
                        )
                    )
    return samples


FUSED_ONLY: frozenset[ModelName] = frozenset({"bm25_fallback", "native_hybrid_other_languages"})


def features_of(samples: Sequence[Sample], model: ModelName) -> np.ndarray:
    if model == "dense":
        return np.array([[s.cosine or 0.0] for s in samples])
    if model in FUSED_ONLY:
        return np.array([[s.fused or 0.0] for s in samples])
    return np.array([[s.cosine or 0.0, s.fused or 0.0] for s in samples])


def as_coefficients(model: ModelName, fitted: list[float]) -> list[float]:
    """[intercept, cosine, fused] as RELEVANCE_CALIBRATION takes them."""
    if model == "dense":
        return [fitted[0], fitted[1], 0.0]
    if model in FUSED_ONLY:
        return [fitted[0], 0.0, fitted[1]]
    return fitted


def summary(samples: Sequence[Sample]) -> dict[str, Any]:
    labels = [s.relevant for s in samples]
    relevance = [s.relevance for s in samples]
    raw = [min(1.0, max(0.0, s.raw)) for s in samples]
    return {
        "hits": len(samples),
        "share_relevant": sum(labels) / len(labels) if labels else math.nan,
        "brier": brier(relevance, labels),
        "ece": ece(relevance, labels),
        "raw_brier": brier(raw, labels),
        "raw_ece": ece(raw, labels),
        "reliability": reliability(relevance, labels),
    }


PATHS: tuple[SearchPath, ...] = ("native_hybrid", "dense", "bm25_fallback")


MODELS: tuple[ModelName, ...] = ("native_hybrid", "native_hybrid_other_languages", "dense", "bm25_fallback")


OTHER_LANGUAGES: ModelName = "native_hybrid_other_languages"


async def fit(models: Sequence[ModelName] = MODELS, work_dir: Path = WORK_DIR) -> dict[str, list[float]]:
    """Fit ``models`` (the others keep their coefficients in tuned/calibration.json)."""
    # English models on SciFact train; the other-languages hybrid model on NorQuAD dev (Norwegian).
    samples: list[Sample] = []
    if any(model != OTHER_LANGUAGES for model in models):
        samples += await collect("scifact", "train", {}, PATHS, work_dir)
    if OTHER_LANGUAGES in models:
        samples += await collect("norquad", "dev", {}, ("native_hybrid",), work_dir)
    fitted: dict[str, list[float]] = json.loads(OUT.read_text(encoding="utf-8")) if OUT.is_file() else {}
    for model in models:
        own = [s for s in samples if s.model == model]
        labels = np.array([float(s.relevant) for s in own])
        coefficients = as_coefficients(model, fit_platt(features_of(own, model), labels))
        fitted[model] = [round(value, 3) for value in coefficients]
        print(f"{model}: {len(own)} hits, {labels.mean():.3f} relevant -> {fitted[model]}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(fitted, indent=2) + "\n", encoding="utf-8")
    print(f"RELEVANCE_CALIBRATION='{json.dumps(fitted)}'  (written to {OUT})")
    return fitted


async def report(datasets: Sequence[str], work_dir: Path = WORK_DIR) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in datasets:
        samples = await collect(name, "test", {}, PATHS, work_dir)
        for model in MODELS:
            own = [s for s in samples if s.model == model]
            if not own:
                continue
            results[f"{name}/{model}"] = row = summary(own)
            print(
                f"{name:8} {model:29} hits {row['hits']:5}  relevant {row['share_relevant']:.3f}  "
                f"brier {row['brier']:.3f} (raw {row['raw_brier']:.3f})  ece {row['ece']:.3f} (raw {row['raw_ece']:.3f})"
            )
            for line in row["reliability"]:
                print(
                    f"    relevance {line['bin']:.1f}-{line['bin'] + 0.2:.1f}: {line['hits']:5} hits, "
                    f"mean {line['mean_relevance']:.3f}, relevant {line['share_relevant']:.3f}"
                )
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibration", description=__doc__)
    parser.add_argument("--fit", action="store_true", help="fit on SciFact train and write tuned/calibration.json")
    parser.add_argument("--report", action="store_true", help="Brier and ECE of the defaults on the test splits")
    parser.add_argument("--datasets", default="scifact,norquad", help="datasets for --report")
    parser.add_argument("--out", type=Path, help="also write the report as JSON here")
    parser.add_argument("--models", default=",".join(MODELS), help="models to fit (the rest keep theirs)")
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR, help="where benchmarks.quality built the stores")
    args = parser.parse_args(argv)
    if not args.fit and not args.report:
        parser.error("pass --fit and/or --report")
    if args.fit:
        chosen = [model for model in MODELS if model in args.models.split(",")]
        if not chosen:
            parser.error(f"--models: expected some of {', '.join(MODELS)}")
        asyncio.run(fit(chosen, args.work_dir))
    if args.report:
        results = asyncio.run(report([name for name in args.datasets.split(",") if name], args.work_dir))
        if args.out:
            args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
