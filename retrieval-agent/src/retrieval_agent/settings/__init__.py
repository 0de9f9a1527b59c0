"""Every retrieval-agent variable: the contract's groups plus the service's own, one settings
class per concern, composed into :class:`Settings`.

Every variable keeps its flat name (``RERANKER_MODEL``) and is read as ``settings.reranker_model``;
a component that needs one concern can take that group's type (``RerankSettings``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Self

from pydantic import model_validator

from rag_runtime.embedding.query_int8 import query_int8_enabled
from retrieval_agent.relevance_models import ModelName, PlattModel, default_models, parse_models
from retrieval_agent.settings.chat import AgentSettings, ChatSettings, MemorySettings
from retrieval_agent.settings.search import (
    FollowUpMode,
    HybridSettings,
    QueryGenerationSettings,
    RelevanceSettings,
    RerankerProvider,
    RerankSettings,
    ResultSets,
    ResultSettings,
)
from retrieval_agent.settings.server import LogLevel, QueryEmbeddingSettings, ServerSettings
from shared_contract import ContractSettings, load_settings
from shared_contract.settings import CONTRACT_GROUPS, SettingsGroup

# The groups in the order .env.example documents them.
GROUPS: tuple[type[SettingsGroup], ...] = (
    *CONTRACT_GROUPS,
    ServerSettings,
    QueryEmbeddingSettings,
    ResultSettings,
    HybridSettings,
    RerankSettings,
    RelevanceSettings,
    QueryGenerationSettings,
    AgentSettings,
    ChatSettings,
    MemorySettings,
)


# Bases from the last group to the first: pydantic lists the fields of the base furthest down the
# MRO first, so ``model_fields`` follows GROUPS.
class Settings(
    MemorySettings,
    ChatSettings,
    AgentSettings,
    QueryGenerationSettings,
    RelevanceSettings,
    RerankSettings,
    HybridSettings,
    ResultSettings,
    QueryEmbeddingSettings,
    ServerSettings,
    ContractSettings,
):
    """Every retrieval-agent variable. Build it with :func:`get_settings` (or explicitly in tests).

    What follows reads more than one group.
    """

    @property
    def relevance_models(self) -> Mapping[ModelName, PlattModel]:
        """The Platt models per retrieval path: the defaults for HYBRID_FUSION, with RELEVANCE_CALIBRATION's overrides."""
        defaults = default_models(self.hybrid_fusion)
        if not self.relevance_calibration.strip():
            return defaults
        return parse_models(json.loads(self.relevance_calibration), defaults)

    @property
    def effective_memory_model(self) -> str:
        """MEMORY_MODEL, or CHAT_DEFAULT_MODEL when unset."""
        return self.memory_model.strip() or self.chat_default_model

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


__all__ = [
    "GROUPS",
    "AgentSettings",
    "ChatSettings",
    "FollowUpMode",
    "HybridSettings",
    "LogLevel",
    "MemorySettings",
    "QueryEmbeddingSettings",
    "QueryGenerationSettings",
    "RelevanceSettings",
    "RerankSettings",
    "RerankerProvider",
    "ResultSets",
    "ResultSettings",
    "ServerSettings",
    "Settings",
    "get_settings",
]
