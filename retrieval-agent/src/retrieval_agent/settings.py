"""Every retrieval-agent variable; the contract ones come from :class:`ContractSettings`."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Self

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator

from rag_runtime.embedding.query_int8 import QueryQuantization, query_int8_enabled
from rag_runtime.http import LogFormat
from retrieval_agent.relevance_models import ModelName, PlattModel, RerankerScale, default_models, parse_models
from shared_contract import ContractConfigError, ContractSettings, load_settings
from shared_contract.names import check_collection_name
from shared_contract.settings import check_api_key, check_http_url

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
RerankerProvider = Literal["http", "fastembed"]
ResultSets = Literal["merged", "per_query"]


# How a short follow-up turn is searched without an LLM (see ``followup_context``).
FollowUpMode = Literal["off", "combined", "both"]


class Settings(ContractSettings):
    """Every retrieval-agent variable. Build it with :func:`get_settings` (or explicitly in tests).

    QUERY_EMBEDDING_THREADS (default 1) is the query model's ONNX Runtime thread count, separate
    from EMBEDDING_THREADS: one short query gains nothing from intra-op threads, whose spinning
    workers take the cores the store's search threads need next (hybrid /search on 2 shared
    cores: p50 40 -> 24 ms). The vectors are the same for any thread count. 0 uses EMBEDDING_THREADS.
    """

    # Server and auth.
    api_key: SecretStr = Field(description="Bearer token Open WebUI sends; at least 32 characters.")
    host: str = "0.0.0.0"  # noqa: S104 - a container service listens on every interface
    port: int = Field(default=8000, ge=1, le=65535)
    log_level: LogLevel = "INFO"
    log_format: LogFormat = Field(default="json", description="json: one JSON object per line; text: plain lines.")
    metrics_enabled: bool = True
    enable_mcp: bool = Field(
        default=True, description="Serve the knowledge base over MCP (streamable HTTP) at /mcp, behind API_KEY."
    )
    # Open WebUI's bypass mode forwards chat turns verbatim, pasted images as base64 parts included
    # (only their text is used): a 4 MiB cap turned a pasted photo into "no sources".
    max_request_bytes: int = Field(default=32 * 1024 * 1024, gt=0, description="Request body cap of every route.")

    query_embedding_threads: int = Field(
        default=1, ge=0, description="ONNX threads of the query embedding model; 0 = EMBEDDING_THREADS."
    )
    query_embedding_quantization: QueryQuantization = Field(
        default="auto",
        description="int8: queries run on an int8 copy of the fastembed dense model (~2x faster, query vectors "
        "at cosine 0.98 or more to fp32; documents keep fp32); auto: int8 for the models measured so "
        "(all-MiniLM-L6-v2), none: fp32 queries (docs/models.md).",
    )

    # Response shape: one merged list (what Open WebUI reads) or one list per resolved query.
    search_result_sets: ResultSets = "merged"
    search_metadata_fields: str = Field(
        default="name,source,file_id,collection_name,page,headers,title,authors,languages,extractor,data",
        description="Comma-separated meta keys /search returns (what citations need); * returns the stored meta "
        "verbatim, with the uploader's user_id, version fields and hashes.",
    )
    multi_query_rrf_k: int = Field(default=60, ge=1, description="RRF constant when merging several queries.")

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

    # Calibrated relevance (the /search distances).
    relevance_calibration: str = Field(
        default="",
        description='JSON {"native_hybrid"|"native_hybrid_other_languages"|"dense"|"bm25_fallback": [intercept, '
        "cosine, fused]} overriding the fitted Platt coefficients (python -m benchmarks.calibration fits your own).",
    )

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

    # Agentic mode (design section 5): a PydanticAI loop over the same retrieval steps. The model is
    # AGENT_MODEL at AGENT_API_BASE_URL (shared with query generation); the limits are enforced in code.
    enable_agentic_rag: bool = Field(
        default=False, description="Route /search to the agentic loop instead of the linear pipeline."
    )
    agent_max_iterations: int = Field(
        default=3, ge=1, le=10, description="Most retrieve rounds per request (enforced in code, not only asked)."
    )
    agent_timeout: float = Field(
        default=60.0,
        gt=0,
        le=600,
        description="Wall-clock seconds of one agent run; after it, what was retrieved is returned.",
    )
    agent_tool_preview_chars: int = Field(
        default=200, ge=20, le=4000, description="Characters of each result the model sees (the response has all)."
    )
    agent_preview_k: int = Field(default=5, ge=1, le=50, description="Results of a retrieve call the model sees.")
    agent_fetch_k: int = Field(
        default=20, ge=1, le=200, description="Candidates per query of a retrieve call, before rerank and k."
    )
    agent_strict_tools: bool = Field(default=True, description="Send the tools as strict JSON schemas.")
    agent_system_prompt: str = Field(
        default="",
        max_length=20_000,
        description="Replaces the built-in system prompt ($max_iterations is filled in); empty = built-in.",
    )
    agent_conversation_history_messages: int = Field(
        default=4, ge=1, le=50, description="Last chat messages the agent reads."
    )
    agent_include_raw_query: bool = Field(
        default=True, description="Seed the first retrieve round with the user's own question."
    )
    agent_document_max_chars: int = Field(
        default=20_000,
        ge=500,
        le=200_000,
        description="read_document: the whole document rebuilt from its chunks is cut at this many characters.",
    )

    # OpenAI-compatible chat (POST /v1/chat/completions, GET /v1/models): retrieval first, then the
    # upstream chat model through LiteLLM (any provider).
    chat_upstream_base_url: str | None = Field(
        default=None,
        description="The upstream's OpenAI-compatible base URL (e.g. http://ollama:11434/v1); unset = /v1 "
        "chat disabled (503).",
    )
    chat_upstream_api_key: SecretStr | None = Field(default=None, description="Bearer key sent to the upstream.")
    chat_default_model: str = Field(
        default="gpt-4o-mini",
        description="A model /v1/models always lists (added when the upstream's list lacks it), and the "
        "memory's model when MEMORY_MODEL is empty; a LiteLLM provider prefix (anthropic/...) goes to that "
        "provider, a bare name to CHAT_UPSTREAM_BASE_URL.",
    )
    chat_context_k: int = Field(default=5, ge=1, le=50, description="Passages injected as context per chat turn.")
    chat_rag_tools: bool = Field(
        default=True, description="Offer the model read_full_document and search (run by this service)."
    )
    chat_max_tool_rounds: int = Field(
        default=3, ge=0, le=10, description="Most tool rounds per chat turn; then one last call without tools."
    )
    chat_knowledge_bases: str = Field(
        default="",
        description="Comma-separated knowledge bases chat may search (and /v1/models lists); empty = any.",
    )
    chat_timeout: float = Field(default=120.0, gt=0, le=600, description="Seconds per upstream chat call, as a whole.")

    # Long-term memory: one Markdown file per fact under MEMORY_PATH/<user>/, every change a Git commit,
    # indexed under the tenant memory-<user>; reconciled on each chat turn by the chat model.
    enable_memory: bool = Field(
        default=False,
        description="Remember facts per user (chat's `user` field or MEMORY_USER_HEADER) and serve "
        "/api/v1/memory; needs the git binary.",
    )
    memory_path: Path = Field(
        default=Path(".data/memory"), description="One folder (and Git repository) per user of Markdown facts."
    )
    memory_model: str = Field(
        default="",
        description="Model that extracts and reconciles facts, at CHAT_UPSTREAM_BASE_URL; empty = CHAT_DEFAULT_MODEL.",
    )
    memory_user_header: str = Field(
        default="X-OpenWebUI-User-Id",
        description="Header naming the user when a chat request has no `user` field (Open WebUI forwards it "
        "with ENABLE_FORWARD_USER_INFO_HEADERS).",
    )
    memory_scope: Literal["user", "conversation"] = Field(
        default="user",
        description="user: every conversation shares the user's facts; conversation: only the facts learned "
        "in the same conversation (metadata.chat_id or X-OpenWebUI-Chat-Id) are recalled.",
    )
    memory_context_k: int = Field(default=5, ge=1, le=50, description="Facts injected per chat turn.")
    memory_max_operations: int = Field(
        default=5, ge=1, le=50, description="Most ADD/UPDATE/DELETE operations one turn may apply."
    )
    memory_candidates: int = Field(
        default=5, ge=1, le=20, description="Existing facts shown to the model next to each new candidate fact."
    )
    memory_min_relevance: float = Field(
        default=0.2, ge=0.0, le=1.0, description="Facts whose cosine to the turn is below this are not recalled."
    )
    memory_recency_half_life_days: float = Field(
        default=30.0, gt=0, description="Age (since the last update) at which a fact's recency boost halves."
    )
    memory_recency_weight: float = Field(
        default=0.3, ge=0.0, le=1.0, description="Share of a fact's score that recency decides (0 = relevance only)."
    )
    memory_mmr_lambda: float = Field(
        default=0.7, ge=0.0, le=1.0, description="MMR trade-off: 1 = relevance only, lower = more diverse facts."
    )
    memory_timeout: float = Field(
        default=60.0,
        gt=0,
        le=600,
        description="Seconds for one turn's reconciliation (both model calls); also the longest recall, the memory API "
        "and shutdown wait for reconciliations still running.",
    )

    @property
    def relevance_models(self) -> Mapping[ModelName, PlattModel]:
        """The Platt models per retrieval path: the defaults for HYBRID_FUSION, with RELEVANCE_CALIBRATION's overrides."""
        defaults = default_models(self.hybrid_fusion)
        if not self.relevance_calibration.strip():
            return defaults
        return parse_models(json.loads(self.relevance_calibration), defaults)

    @property
    def effective_reranker_score_scale(self) -> RerankerScale:
        """RERANKER_SCORE_SCALE, with auto resolved: fastembed returns logits, HTTP rerankers probabilities."""
        if self.reranker_score_scale != "auto":
            return self.reranker_score_scale
        return "logit" if self.reranker_provider == "fastembed" else "probability"

    @property
    def public_metadata_fields(self) -> frozenset[str] | None:
        """The meta keys /search returns; None means every stored key."""
        fields = [part.strip() for part in self.search_metadata_fields.split(",") if part.strip()]
        return None if "*" in fields else frozenset(fields)

    @property
    def effective_memory_model(self) -> str:
        """MEMORY_MODEL, or CHAT_DEFAULT_MODEL when unset."""
        return self.memory_model.strip() or self.chat_default_model

    @property
    def chat_knowledge_base_list(self) -> frozenset[str] | None:
        """CHAT_KNOWLEDGE_BASES as a set; None when every knowledge base may be searched."""
        names = frozenset(part.strip() for part in self.chat_knowledge_bases.split(",") if part.strip())
        return names or None

    @field_validator("chat_knowledge_bases")
    @classmethod
    def _knowledge_bases(cls, value: str) -> str:
        for part in value.split(","):
            if part.strip():
                try:
                    check_collection_name(part.strip(), field="each name")
                except ValueError as exc:
                    raise ContractConfigError("CHAT_KNOWLEDGE_BASES", str(exc)) from exc
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level(cls, value: object) -> object:
        # `rag dev --log-level info` and Python's logging take any case.
        return value.upper() if isinstance(value, str) else value

    @field_validator("api_key")
    @classmethod
    def _long_key(cls, value: SecretStr) -> SecretStr:
        return check_api_key(value)

    @field_validator("reranker_api_base_url", "agent_api_base_url", "chat_upstream_base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return check_http_url(value)

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

    @model_validator(mode="after")
    def _check_reranker(self) -> Self:
        if self.enable_reranking and self.reranker_provider == "http" and self.reranker_api_base_url is None:
            raise ContractConfigError("RERANKER_API_BASE_URL", "is required when ENABLE_RERANKING=true with http")
        return self

    @model_validator(mode="after")
    def _check_memory_path(self) -> Self:
        # Refused at start-up: else the service runs ready and every memory write fails.
        path = self.memory_path
        if self.enable_memory and path.exists():
            if not path.is_dir():
                raise ContractConfigError("MEMORY_PATH", f"{path} is not a directory")
            if not os.access(path, os.W_OK | os.X_OK):
                raise ContractConfigError("MEMORY_PATH", f"{path} is not writable")
        return self

    @model_validator(mode="after")
    def _check_quantization(self) -> Self:
        self.query_int8  # noqa: B018 - raises ContractConfigError for int8 beside an HTTP provider
        return self

    @property
    def query_int8(self) -> bool:
        """Whether queries run on the dense model's int8 copy (QUERY_EMBEDDING_QUANTIZATION)."""
        return query_int8_enabled(
            self.query_embedding_quantization, provider=self.embedding_provider, model_name=self.embedding_model
        )

    @property
    def hybrid_sparse_queries(self) -> bool:
        """Whether query-time sparse vectors are computed (hybrid on and a sparse model configured)."""
        return self.enable_hybrid_search and self.enable_sparse_embeddings


def get_settings() -> Settings:
    """Settings from the environment; invalid values raise ContractConfigError naming the variable."""
    return load_settings(Settings)
