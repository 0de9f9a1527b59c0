from __future__ import annotations

import json

import httpx
import pytest

from benchmarks.agent_overhead import instant_model, instant_reply
from benchmarks.client import SearchResult, parse_search
from benchmarks.ingest import file_id_for
from benchmarks.memory import CASES, DECIDE_TOOL, oracle_reply
from benchmarks.metrics import rank
from benchmarks.quality import hits_to_run, parse_args
from benchmarks.rerank_server import RerankServer
from benchmarks.speed import percentile


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 95) == 95.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0], 99) == 3.0


def test_file_ids_are_safe_and_distinct() -> None:
    assert file_id_for("scifact", "4983") == "scifact-4983"
    odd = file_id_for("x", "a/b c")
    assert odd.startswith("x-a_b_c_")
    assert odd != file_id_for("x", "a_b_c")


def test_hits_map_to_best_chunk_per_doc_and_count_foreign() -> None:
    body = {
        "documents": [["c1", "c2", "c3", "c4"]],
        "metadatas": [[{"file_id": "d-1"}, {"file_id": "other"}, {"file_id": "d-1"}, {"file_id": "d-2"}]],
        "distances": [[0.9, 0.8, 0.7, 0.6]],
    }
    run, foreign = hits_to_run(SearchResult(parse_search(body), 0.0), {"d-1": "1", "d-2": "2"})
    assert run == {"1": 0.0, "2": -3.0}  # positions: the list order is the ranking
    assert foreign == 1


def test_tied_distances_keep_the_order_search_returned() -> None:
    # Capped relevance ties down the list; the doc ids would sort "1" before "2".
    body = {
        "documents": [["c1", "c2", "c3"]],
        "metadatas": [[{"file_id": "d-3"}, {"file_id": "d-2"}, {"file_id": "d-1"}]],
        "distances": [[0.4, 0.4, 0.4]],
    }
    run, _ = hits_to_run(SearchResult(parse_search(body), 0.0), {"d-1": "1", "d-2": "2", "d-3": "3"})
    assert rank(run) == ["3", "2", "1"]
    assert parse_search({"documents": [], "metadatas": [], "distances": []}) == []


def test_scripted_rerank_server_speaks_both_shapes() -> None:
    with RerankServer() as server:
        cohere = httpx.post(
            f"{server.url}/v1/rerank",
            json={"query": "blood aspirin", "documents": ["nothing here", "aspirin thins blood"], "top_n": 1},
        ).json()
        tei = httpx.post(f"{server.url}/rerank", json={"query": "blood", "texts": ["x", "blood"]}).json()
    assert cohere["results"] == [{"index": 1, "relevance_score": 1.0}]
    assert tei[0] == {"index": 1, "score": 1.0}
    assert server.calls == 2


def test_instant_model_calls_retrieve_with_the_question_then_stops() -> None:
    first = json.loads(
        instant_reply({"messages": [{"role": "user", "content": "Search request:\n- does aspirin help\n\nFind them."}]})
    )
    call = first["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "retrieve"
    assert json.loads(call["arguments"])["queries"] == ["does aspirin help"]
    done = json.loads(instant_reply({"messages": [{"role": "user", "content": "x"}, {"role": "assistant"}]}))
    assert done["choices"][0]["message"]["content"] == "DONE"


def test_instant_model_serves_over_http() -> None:
    with instant_model() as url:
        response = httpx.post(f"{url}/chat/completions", json={"messages": []}, timeout=10)
    assert response.status_code == 200
    assert response.json()["choices"][0]["finish_reason"] == "tool_calls"


def test_memory_oracle_updates_the_concerned_fact_only_when_it_was_shown() -> None:
    case = CASES[0]
    assert case.target is not None

    def decide(shown: str) -> list[dict[str, object]]:
        body = {
            "tools": [{"type": "function", "function": {"name": DECIDE_TOOL}}],
            "messages": [
                {
                    "role": "user",
                    "content": f"Existing facts:\n{shown}\n\nNew candidate facts:\n- {case.candidate} (language: en)",
                }
            ],
        }
        call = json.loads(oracle_reply(body))["choices"][0]["message"]["tool_calls"][0]
        operations: list[dict[str, object]] = json.loads(call["function"]["arguments"])["operations"]
        return operations

    assert decide(f"1. The user lives in Bergen.\n2. {case.target}") == [
        {"action": "UPDATE", "fact": 2, "reason": "contradiction", "text": case.candidate}
    ]
    assert decide("1. The user lives in Bergen.") == [
        {"action": "ADD", "text": case.candidate, "language": "en", "reason": "new"}
    ]


def test_quality_set_overrides_every_config_with_named_settings() -> None:
    args = parse_args(["--configs=hybrid", "--set", "hybrid_multilingual_weight=1.6", "--set", "HYBRID_RRF_K = 5"])
    assert args.set == {"HYBRID_MULTILINGUAL_WEIGHT": "1.6", "HYBRID_RRF_K": "5"}
    with pytest.raises(SystemExit):
        parse_args(["--set", "HYBRID_MULTILINGUAL_WEIGHT"])
