from __future__ import annotations

from qdrant_client import models

from retrieval_agent.search.query import (
    FusionParams,
    dense_request,
    hybrid_request,
    lexical_request,
    rrf_max_score,
    tenant_filter,
)
from shared_contract import SparseVectorData

TENANT = models.Filter(
    must=[models.FieldCondition(key="meta.collection_name", match=models.MatchAny(any=["kb-1", "kb-2"]))]
)
PARAMS = FusionParams(k=60, weights=(1.0, 0.5), prefetch_limit=40)


def test_tenant_filter() -> None:
    assert tenant_filter(["kb-1", "kb-2"]) == TENANT


def test_dense_request() -> None:
    request = dense_request([0.1, 0.2], ["kb-1", "kb-2"], 7)
    assert request == models.QueryRequest(
        query=[0.1, 0.2], using="text-dense", filter=TENANT, limit=7, with_payload=True
    )


def test_hybrid_request_filters_every_leg_and_fuses_with_weighted_rrf() -> None:
    request = hybrid_request([0.1], SparseVectorData(indices=[3, 9], values=[0.5, 0.25]), ["kb-1", "kb-2"], 10, PARAMS)
    assert request == models.QueryRequest(
        prefetch=[
            models.Prefetch(query=[0.1], using="text-dense", filter=TENANT, limit=40),
            models.Prefetch(
                query=models.SparseVector(indices=[3, 9], values=[0.5, 0.25]),
                using="text-sparse",
                filter=TENANT,
                limit=40,
            ),
        ],
        query=models.RrfQuery(rrf=models.Rrf(k=60, weights=[1.0, 0.5])),
        limit=10,
        with_payload=True,
    )
    # The wire form a Qdrant server receives.
    wire = request.model_dump(exclude_none=True)
    assert wire["query"] == {"rrf": {"k": 60, "weights": [1.0, 0.5]}}
    assert all(leg["filter"] == TENANT.model_dump(exclude_none=True) for leg in wire["prefetch"])


def test_lexical_request_uses_a_text_query_on_content() -> None:
    request = lexical_request([0.1], "zebra stripes", ["kb-1", "kb-2"], 5, PARAMS)
    assert request.prefetch is not None
    assert isinstance(request.prefetch, list)
    text_leg = request.prefetch[1]
    assert text_leg == models.Prefetch(
        query=models.TextQuery(text="zebra stripes"), using="content", filter=TENANT, limit=40
    )
    assert request.prefetch[0].filter == TENANT


def test_rrf_max_score_documents_the_scale() -> None:
    assert rrf_max_score(FusionParams(k=60, weights=(1.0, 1.0), prefetch_limit=1)) == 2 / 60
    assert rrf_max_score(FusionParams(k=2, weights=(1.0, 0.0), prefetch_limit=1)) == 1 / 2
