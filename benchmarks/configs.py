"""Retrieval configurations, as the environment the retrieval agent reads at start-up.

Each config restarts `rag dev` on the same store with this environment (ingestion happens once).
Names follow retrieval_agent.settings; keep them in step with it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
TUNED_DIR = BENCH_DIR / "tuned"

BASE: dict[str, str] = {"ENABLE_RERANKING": "false", "ENABLE_AGENTIC_RAG": "false"}

CONFIG_ENV: dict[str, dict[str, str]] = {
    "dense": {**BASE, "ENABLE_HYBRID_SEARCH": "false"},
    # One leg alone: hybrid with every other leg's fusion weight at zero (weighted RRF gives it 0).
    "sparse": {
        **BASE,
        "ENABLE_HYBRID_SEARCH": "true",
        "HYBRID_DENSE_WEIGHT": "0",
        "HYBRID_MULTILINGUAL_WEIGHT": "0",
        "HYBRID_SPARSE_WEIGHT": "1",
        "HYBRID_LEXICAL_WEIGHT": "0",
    },
    "bm25": {
        **BASE,
        "ENABLE_HYBRID_SEARCH": "true",
        "HYBRID_DENSE_WEIGHT": "0",
        "HYBRID_MULTILINGUAL_WEIGHT": "0",
        "HYBRID_SPARSE_WEIGHT": "0",
        "HYBRID_LEXICAL_WEIGHT": "1",
    },
    # The service's defaults (z-score fusion tuned jointly on SciFact train and NorQuAD dev).
    "hybrid": {**BASE, "ENABLE_HYBRID_SEARCH": "true"},
    # The defaults without the multilingual dense leg (the defaults before contract 2.3).
    "hybrid-no-multilingual": {**BASE, "ENABLE_HYBRID_SEARCH": "true", "HYBRID_MULTILINGUAL_WEIGHT": "0"},
    # The defaults before z-score fusion: weighted RRF in the engine, tuned the same way.
    "rrf5": {
        **BASE,
        "ENABLE_HYBRID_SEARCH": "true",
        "HYBRID_FUSION": "rrf",
        "HYBRID_RRF_K": "5",
        "HYBRID_DENSE_WEIGHT": "0.75",
        "HYBRID_MULTILINGUAL_WEIGHT": "0",
        "HYBRID_SPARSE_WEIGHT": "0.25",
        "HYBRID_LEXICAL_WEIGHT": "0.5",
    },
    # Textbook RRF (k 60, equal weights), the starting point before tuning.
    "rrf60": {
        **BASE,
        "ENABLE_HYBRID_SEARCH": "true",
        "HYBRID_FUSION": "rrf",
        "HYBRID_RRF_K": "60",
        "HYBRID_DENSE_WEIGHT": "1.0",
        "HYBRID_DENSE_WEIGHT_OTHER_LANGUAGES": "1.0",
        "HYBRID_MULTILINGUAL_WEIGHT": "1.0",
        "HYBRID_SPARSE_WEIGHT": "1.0",
        "HYBRID_LEXICAL_WEIGHT": "1.0",
        "HYBRID_PREFETCH_MULTIPLIER": "4",
    },
}

ALL_CONFIGS = ["dense", "sparse", "bm25", "rrf60", "rrf5", "hybrid", "hybrid-no-multilingual", "tuned", "rerank"]


def tuned_path(dataset: str, fusion: str = "zscore") -> Path:
    """benchmarks.tune's output for a dataset (or ``joint``): ``<name>-zscore.json``, or ``<name>.json`` for RRF."""
    return TUNED_DIR / (f"{dataset}.json" if fusion == "rrf" else f"{dataset}-{fusion}.json")


def tuned_env(dataset: str) -> dict[str, str] | None:
    """The best fusion settings found by benchmarks.tune on the tuning split (z-score when tuned,
    else RRF), or None if not tuned yet."""
    path = next((p for p in (tuned_path(dataset), tuned_path(dataset, "rrf")) if p.exists()), None)
    if path is None:
        return None
    best = json.loads(path.read_text(encoding="utf-8"))["best"]
    # Files written before z-score fusion existed hold RRF points without HYBRID_FUSION.
    env = {"HYBRID_FUSION": "rrf", **{key: str(value) for key, value in best["env"].items()}}
    return {**BASE, "ENABLE_HYBRID_SEARCH": "true", **env}


def rerank_env(rerank_url: str) -> dict[str, str]:
    return {**BASE, "ENABLE_HYBRID_SEARCH": "true", "ENABLE_RERANKING": "true", "RERANKER_API_BASE_URL": rerank_url}


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """``--set NAME=VALUE`` (repeatable): a retrieval setting over every config row."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a retrieval setting over every config, e.g. HYBRID_MULTILINGUAL_WEIGHT=1.6 (repeatable)",
    )


def parse_set_option(parser: argparse.ArgumentParser, items: Sequence[str]) -> dict[str, str]:
    """The ``--set`` items as an environment (names upper-cased); a malformed item is a usage error."""
    overrides: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            parser.error(f"--set expects NAME=VALUE, got {item!r}")
        overrides[name.strip().upper()] = value.strip()
    return overrides
