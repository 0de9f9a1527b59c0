"""Annotated dependency aliases; lifespan-held objects are reached only through these.

The providers are ``async def``: FastAPI runs a plain ``def`` dependency in a worker thread, a
thread hop per dependency per request for what is an attribute read.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.agent.loop import AgenticSearch
from retrieval_agent.chat.passthrough import UpstreamPassThrough
from retrieval_agent.chat.service import ChatService
from retrieval_agent.memory.service import MemoryService
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.citations import CitationLinks
from retrieval_agent.search.pipeline import LinearSearch
from retrieval_agent.settings import Settings


async def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_search(request: Request) -> LinearSearch:
    search: LinearSearch = request.app.state.search
    return search


async def get_agent(request: Request) -> AgenticSearch | None:
    """The agentic search when ENABLE_AGENTIC_RAG=true, else None."""
    agent: AgenticSearch | None = request.app.state.agent
    return agent


async def get_chat(request: Request) -> ChatService | None:
    """The chat service when CHAT_UPSTREAM_BASE_URL is set, else None."""
    chat: ChatService | None = getattr(request.app.state, "chat", None)
    return chat


async def get_passthrough(request: Request) -> UpstreamPassThrough | None:
    """The pass-through of the other /v1 routes when CHAT_UPSTREAM_BASE_URL is set, else None."""
    passthrough: UpstreamPassThrough | None = getattr(request.app.state, "passthrough", None)
    return passthrough


async def get_memory(request: Request) -> MemoryService | None:
    """The memory service when ENABLE_MEMORY=true, else None."""
    memory: MemoryService | None = getattr(request.app.state, "memory", None)
    return memory


async def get_citations(request: Request) -> CitationLinks | None:
    """The citation links when CITATION_SIGNING_KEY and CITATION_BASE_URL are set, else None."""
    citations: CitationLinks | None = request.app.state.citations
    return citations


async def get_store(request: Request) -> StoreSearch:
    store: StoreSearch = request.app.state.store
    return store


async def get_metrics(request: Request) -> SearchMetrics:
    metrics: SearchMetrics = request.app.state.metrics
    return metrics


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
SearchDep = Annotated[LinearSearch, Depends(get_search)]
AgentDep = Annotated[AgenticSearch | None, Depends(get_agent)]
ChatDep = Annotated[ChatService | None, Depends(get_chat)]
PassThroughDep = Annotated[UpstreamPassThrough | None, Depends(get_passthrough)]
MemoryDep = Annotated[MemoryService | None, Depends(get_memory)]
CitationsDep = Annotated[CitationLinks | None, Depends(get_citations)]
StoreDep = Annotated[StoreSearch, Depends(get_store)]
MetricsDep = Annotated[SearchMetrics, Depends(get_metrics)]
