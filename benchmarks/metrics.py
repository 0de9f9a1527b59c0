"""nDCG@10, Recall@100 and MRR@10 with the standard definitions.

Conventions (the same as trec_eval / pytrec_eval, which BEIR reports, except the tie rule):

* A document is relevant when its qrels grade is > 0. Grades of 0 are judged non-relevant.
* nDCG@k: DCG = sum over ranks i = 1..k of gain(doc_i) / log2(i + 1). Gain is the grade itself
  (``gain="linear"``, trec_eval's ``ndcg_cut``) or ``2**grade - 1`` (``gain="exponential"``); the
  two agree on binary qrels such as SciFact's and NorQuAD's. The ideal DCG ranks the query's
  qrels grades in descending order, so relevant documents the run never returned still count.
* Recall@k = |relevant ∩ top k| / |relevant|.
* MRR@k = 1 / rank of the first relevant document within the top k, else 0.
* Ranking: a run maps doc id -> score; documents are ranked by score descending and **ties are
  broken by doc id ascending**, so a run gives the same metrics whatever order the service
  returned tied documents in (trec_eval breaks ties by doc id too, but descending).
* Averages are over every query with at least one relevant judgement; a query the run has no
  results for scores 0 on all metrics. Queries without a relevant judgement are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Gain = Literal["linear", "exponential"]

# doc id -> score, higher is better
Run = Mapping[str, float]


def rank(run: Run) -> list[str]:
    """Doc ids by score descending, ties by doc id ascending."""
    return [doc_id for doc_id, _ in sorted(run.items(), key=lambda item: (-item[1], item[0]))]


def _gain(grade: int, gain: Gain) -> float:
    if grade <= 0:
        return 0.0
    return float(grade) if gain == "linear" else float(2**grade - 1)


def dcg(grades: list[int], k: int, gain: Gain = "linear") -> float:
    return sum(_gain(grade, gain) / math.log2(i + 2) for i, grade in enumerate(grades[:k]))


def ndcg_at_k(ranking: list[str], qrels: Mapping[str, int], k: int = 10, gain: Gain = "linear") -> float:
    ideal = dcg(sorted(qrels.values(), reverse=True), k, gain)
    if ideal <= 0:
        return 0.0
    return dcg([qrels.get(doc_id, 0) for doc_id in ranking], k, gain) / ideal


def recall_at_k(ranking: list[str], qrels: Mapping[str, int], k: int = 100) -> float:
    relevant = {doc_id for doc_id, grade in qrels.items() if grade > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def mrr_at_k(ranking: list[str], qrels: Mapping[str, int], k: int = 10) -> float:
    for i, doc_id in enumerate(ranking[:k]):
        if qrels.get(doc_id, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


@dataclass(frozen=True)
class QueryScores:
    ndcg_10: float
    recall_100: float
    mrr_10: float


def score_query(run: Run, qrels: Mapping[str, int], gain: Gain = "linear") -> QueryScores:
    ranking = rank(run)
    return QueryScores(
        ndcg_10=ndcg_at_k(ranking, qrels, 10, gain),
        recall_100=recall_at_k(ranking, qrels, 100),
        mrr_10=mrr_at_k(ranking, qrels, 10),
    )


@dataclass(frozen=True)
class Summary:
    queries: int
    ndcg_10: float
    recall_100: float
    mrr_10: float

    def as_dict(self) -> dict[str, float | int]:
        return {"queries": self.queries, "ndcg@10": self.ndcg_10, "recall@100": self.recall_100, "mrr@10": self.mrr_10}


def evaluate(
    runs: Mapping[str, Run], qrels: Mapping[str, Mapping[str, int]], gain: Gain = "linear"
) -> tuple[Summary, dict[str, QueryScores]]:
    """Mean metrics over the judged queries, and the per-query scores."""
    per_query: dict[str, QueryScores] = {}
    for qid, judgements in qrels.items():
        if not any(grade > 0 for grade in judgements.values()):
            continue
        per_query[qid] = score_query(runs.get(qid, {}), judgements, gain)
    n = len(per_query)
    if n == 0:
        return Summary(0, 0.0, 0.0, 0.0), per_query
    return (
        Summary(
            queries=n,
            ndcg_10=sum(s.ndcg_10 for s in per_query.values()) / n,
            recall_100=sum(s.recall_100 for s in per_query.values()) / n,
            mrr_10=sum(s.mrr_10 for s in per_query.values()) / n,
        ),
        per_query,
    )
