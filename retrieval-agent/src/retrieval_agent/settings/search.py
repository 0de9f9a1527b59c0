"""The search groups: the response's shape, the hybrid legs and their fusion, reranking,
calibrated relevance and query generation."""

from __future__ import annotations

import json
from typing import Literal, Self

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator

from retrieval_agent.relevance_models import RerankerScale, parse_models
from shared_contract import ContractConfigError
from shared_contract.settings import SettingsGroup, check_http_url

RerankerProvider = Literal["http", "fastembed"]
ResultSets = Literal["merged", "per_query"]
# How a short follow-up turn is searched without an LLM (see ``followup_context``).
FollowUpMode = Literal["off", "combined", "both"]


class ResultSettings(SettingsGroup):
    """What /search returns."""

    # Response shape: one merged list (what Open WebUI reads) or one list per resolved query.
    search_result_sets: ResultSets = "merged"
    search_metadata_fields: str = Field(
        default="name,source,file_id,collection_name,page,headers,title,authors,languages,extractor,data,window,path,"
        "source_uri,regions,geometry",
        description="Comma-separated meta keys /search returns (what citations need); * returns the stored meta "
        "verbatim, with the uploader's user_id, version fields and hashes.",
    )
    multi_query_rrf_k: int = Field(default=60, ge=1, description="RRF constant when merging several queries.")
    search_window_chars: int = Field(
        default=2000,
        ge=0,
        le=100_000,
        description="Characters of document text each result may show: its chunk plus whole neighbouring chunks "
        "of the same document while they fit (meta.window names the splits); 0 returns the chunk alone.",
    )

    # Citation links (issue 50): where a browser opens the ingestion service's signed citation routes.
    citation_base_url: str | None = Field(
        default=None,
        description="The ingestion service's URL as a browser reaches it (http(s), e.g. https://ingest.example.com); "
        "with CITATION_SIGNING_KEY also set, every citable passage carries signed links to its highlighted page "
        "and its original; unset: no links.",
    )

    @field_validator("citation_base_url")
    @classmethod
    def _citation_url(cls, value: str | None) -> str | None:
        return check_http_url(value)

    @property
    def public_metadata_fields(self) -> frozenset[str] | None:
        """The meta keys /search returns; None means every stored key."""
        fields = [part.strip() for part in self.search_metadata_fields.split(",") if part.strip()]
        return None if "*" in fields else frozenset(fields)


class HybridSettings(SettingsGroup):
    """The legs of a hybrid search, their weights and the caches around them."""

    # Hybrid search: a dense leg, a sparse (BM42) leg and a BM25 leg over the lexical languages present
    # in the requested tenants, fused by z-score (default) or by Qdrant's weighted RRF.
    enable_hybrid_search: bool = True
    # Fusion defaults tuned jointly on SciFact train and NorQuAD dev (benchmarks/tuned/; docs/benchmarks.md).
    hybrid_fusion: Literal["zscore", "rrf"] = Field(
        default="zscore",
        description="How the hybrid legs are fused: zscore (weighted standardised scores, fused by the service "
        "from one batch request) or rrf (Qdrant's weighted RRF in one request).",
    )
    hybrid_rrf_k: int = Field(
        default=5,
        ge=1,
        description="RRF constant of the hybrid fusion when HYBRID_FUSION=rrf, and of the client-side BM25 fallback.",
    )
    hybrid_dense_weight: float = Field(
        default=1.2,
        ge=0.0,
        description="Fusion weight of the dense leg over chunks in the dense model's languages; 0 drops it.",
    )
    hybrid_dense_weight_other_languages: float = Field(
        default=0.0,
        ge=0.0,
        description="Fusion weight of the dense leg over chunks in other languages (monolingual dense models only).",
    )
    hybrid_multilingual_weight: float = Field(
        default=1.2,
        ge=0.0,
        description=(
            "Fusion weight of the multilingual dense leg (text-dense-multilingual) over chunks outside the "
            "dense model's languages; 0 drops it."
        ),
    )
    query_language_routing: bool = Field(
        default=True,
        description=(
            "Weigh the dense legs by the query's language: a query in another language than the dense "
            "model's is read by the multilingual model alone, an English one over mostly English tenants "
            "skips the multilingual model."
        ),
    )
    hybrid_sparse_weight: float = Field(default=0.6, ge=0.0, description="Fusion weight of the sparse leg; 0 drops it.")
    hybrid_lexical_weight: float = Field(
        default=1.0,
        ge=0.0,
        # BM25_WEIGHT was the lexical weight of the old fallbacks; still read so deployments keep their value.
        validation_alias=AliasChoices("hybrid_lexical_weight", "bm25_weight"),
        description="Fusion weight of the BM25 leg (the tenants' language fields merged by score), also of the client-side BM25; 0 drops it.",
    )
    hybrid_prefetch_multiplier: int = Field(
        default=2, ge=1, le=50, description="Each leg fetches max(limit, 10) x this."
    )
    lexical_bm25_k1: float | None = Field(default=None, ge=0.0, description="BM25 k1; None: the engine's 1.2.")
    lexical_bm25_b: float | None = Field(default=None, ge=0.0, le=1.0, description="BM25 b; None: the engine's 0.75.")
    capability_cache_ttl_seconds: float = Field(
        default=10.0, ge=0.0, description="How long the collection's vectors and text indexes are cached."
    )
    lexical_language_cache_ttl_seconds: float = Field(
        default=10.0, ge=0.0, description="How long the lexical languages of a tenant set are cached."
    )
    # The client-side BM25, only for a collection with neither text-sparse nor lexical text indexes.
    bm25_max_docs: int = Field(default=10_000, ge=1)
    bm25_cache_ttl_seconds: float = Field(default=300.0, ge=0.0)
    lexical_retry_after_seconds: float = Field(
        default=300.0, ge=0.0, description="How long BM25 legs are skipped after the store lacked a text index."
    )


class RerankSettings(SettingsGroup):
    """The cross-encoder that reorders the fused candidates."""

    # Reranking.
    enable_reranking: bool = False
    reranker_provider: RerankerProvider = "http"
    reranker_model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    reranker_api_base_url: str | None = None
    reranker_api_key: SecretStr | None = None
    reranker_timeout: float = Field(default=10.0, gt=0)
    initial_retrieval_multiplier: int = Field(default=3, ge=1, le=20)
    reranker_score_scale: Literal["auto", "logit", "probability"] = Field(
        default="auto",
        description="What the reranker returns: logits (fastembed) or probabilities in [0, 1] (TEI, Infinity, "
        "Cohere); auto picks by RERANKER_PROVIDER. Reranked relevance is sigmoid(logit) or the probability.",
    )

    @field_validator("reranker_api_base_url")
    @classmethod
    def _reranker_url(cls, value: str | None) -> str | None:
        return check_http_url(value)

    @model_validator(mode="after")
    def _check_reranker(self) -> Self:
        if self.enable_reranking and self.reranker_provider == "http" and self.reranker_api_base_url is None:
            raise ContractConfigError("RERANKER_API_BASE_URL", "is required when ENABLE_RERANKING=true with http")
        return self

    @property
    def effective_reranker_score_scale(self) -> RerankerScale:
        """RERANKER_SCORE_SCALE, with auto resolved: fastembed returns logits, HTTP rerankers probabilities."""
        if self.reranker_score_scale != "auto":
            return self.reranker_score_scale
        return "logit" if self.reranker_provider == "fastembed" else "probability"


class RelevanceSettings(SettingsGroup):
    """Overrides of the fitted relevance calibration."""

    # Calibrated relevance (the /search distances).
    relevance_calibration: str = Field(
        default="",
        description='JSON {"native_hybrid"|"native_hybrid_other_languages"|"dense"|"bm25_fallback": [intercept, '
        "cosine, fused]} overriding the fitted Platt coefficients (python -m benchmarks.calibration fits your own).",
    )

    @field_validator("relevance_calibration")
    @classmethod
    def _calibration(cls, value: str) -> str:
        if value.strip():
            try:
                raw = json.loads(value)
                if not isinstance(raw, dict):
                    raise ValueError("expected a JSON object")
                parse_models(raw)
            except ValueError as exc:  # json.JSONDecodeError is a ValueError
                raise ContractConfigError("RELEVANCE_CALIBRATION", str(exc)) from exc
        return value


class QueryGenerationSettings(SettingsGroup):
    """The LLM that writes the search queries, and the follow-up rule without it."""

    # Query generation (linear mode).
    enable_query_generation: bool = True
    retrieval_query_generation_prompt_template: str = Field(default="", max_length=8000)
    max_generated_queries: int = Field(default=3, ge=1, le=10)
    agent_model: str = "gpt-4o-mini"
    agent_api_base_url: str | None = None
    agent_api_key: SecretStr | None = None
    query_generation_timeout: float = Field(default=10.0, gt=0)
    followup_context: FollowUpMode = Field(
        default="both",
        description="Without an LLM, a follow-up turn is searched with the previous user turn: both (the "
        "follow-up alone and previous + follow-up, fused), combined (previous + follow-up only), off.",
    )
    followup_max_words: int = Field(
        default=6, ge=0, le=50, description="A user turn of at most this many words counts as a follow-up."
    )

    @field_validator("agent_api_base_url")
    @classmethod
    def _agent_url(cls, value: str | None) -> str | None:
        return check_http_url(value)
