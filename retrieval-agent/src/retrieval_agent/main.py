"""The FastAPI app factory and its lifespan (models load and clients open here, never at import)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Final

import anyio.to_thread
import httpx
import uvicorn
from fastapi import FastAPI
from prometheus_client import ProcessCollector
from pydantic_ai.models import Model

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.http import install_cors
from rag_runtime.language_id import language_identifier
from rag_runtime.llm import import_litellm, provider_names, routed_to_provider
from rag_runtime.store import ChunkStore, close_store, open_store
from retrieval_agent.adapters.git import find_git
from retrieval_agent.adapters.llm import build_memory_model, build_query_model, llm_timeout
from retrieval_agent.adapters.reranker import FastembedReranker, Reranker, build_reranker
from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.agent.loop import AgenticSearch
from retrieval_agent.api.auth import install_edge
from retrieval_agent.api.errors import install_error_handlers
from retrieval_agent.api.openai_errors import install_openai_errors
from retrieval_agent.api.routes import chat, health, memory, metrics, passthrough, search, tools
from retrieval_agent.chat.passthrough import UpstreamPassThrough
from retrieval_agent.chat.service import ChatService
from retrieval_agent.chat.upstream import ChatUpstream
from retrieval_agent.mcp.http import mount_mcp
from retrieval_agent.memory.index import MemoryIndex
from retrieval_agent.memory.reconcile import Reconciler
from retrieval_agent.memory.repository import FactRepository
from retrieval_agent.memory.service import MemoryService
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.citations import Clock, citation_links
from retrieval_agent.search.leniency import ADJUSTED_HEADER
from retrieval_agent.search.pipeline import LinearSearch
from retrieval_agent.search.queries import QueryGenerator
from retrieval_agent.settings import Settings, get_settings
from shared_contract import ContractConfigError

logger = logging.getLogger("retrieval_agent")

# After SIGTERM, requests still running (a chat stream, an agent run) get this long, then are
# cancelled: an upstream that streams forever must not keep the process alive.
SHUTDOWN_GRACE_SECONDS: Final = 10
_MEMORY_MODEL_RULE: Final = (
    "must be a model served at CHAT_UPSTREAM_BASE_URL (no LiteLLM provider prefix): "
    "facts are reconciled with PydanticAI over the OpenAI-compatible API"
)


def build_memory(
    settings: Settings,
    git: str,
    upstream: ChatUpstream | None,
    store: StoreSearch,
    embedder: ContractEmbedder,
    metrics_: SearchMetrics,
    http_client: httpx.AsyncClient,
) -> MemoryService:
    """The memory service; it reconciles with the chat upstream's model when there is one.

    A MEMORY_MODEL that LiteLLM would route to another provider is refused (ContractConfigError): the
    reconciliation's structured output runs over the OpenAI-compatible API at CHAT_UPSTREAM_BASE_URL.
    """
    reconciler = None
    if upstream is not None:
        route = upstream.route(settings.effective_memory_model)
        if route.api_base is None:
            raise ContractConfigError("MEMORY_MODEL", _MEMORY_MODEL_RULE)
        model = build_memory_model(route, http_client)
        reconciler = Reconciler(model, max_operations=settings.memory_max_operations, timeout=settings.memory_timeout)
    else:
        logger.info("memory: no CHAT_UPSTREAM_BASE_URL, so facts come only from the memory API")
    return MemoryService(
        settings,
        repository=FactRepository(settings.memory_path, git),
        # The search's own store view: recall refuses a contract mismatch as search does.
        index=MemoryIndex(store.store, embedder, settings, search_store=store),
        reconciler=reconciler,
        metrics=metrics_,
    )


def check_startup(settings: Settings) -> None:
    """The lifespan's start-up refusals that need no store or model, made before serving, so that
    ``python -m retrieval_agent`` reports them in one line: ContractConfigError naming the variable."""
    if settings.enable_memory:
        find_git()
    if settings.enable_agentic_rag and settings.agent_api_base_url is None:
        raise _agent_endpoint_required()
    if settings.enable_memory and settings.chat_upstream_base_url is not None:
        providers = provider_names(import_litellm())
        if routed_to_provider(settings.effective_memory_model, providers):
            raise ContractConfigError("MEMORY_MODEL", _MEMORY_MODEL_RULE)


def _agent_endpoint_required() -> ContractConfigError:
    return ContractConfigError(
        "AGENT_API_BASE_URL", "is required when ENABLE_AGENTIC_RAG=true (the agent's OpenAI-compatible endpoint)"
    )


def server_config(app: FastAPI, settings: Settings) -> uvicorn.Config:
    """uvicorn's configuration for ``app``: on SIGTERM it stops accepting, waits SHUTDOWN_GRACE_SECONDS
    for running requests, then cancels them."""
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        # uvicorn's loggers (access lines too) go to the root handler, with request ids.
        log_config=None,
    )


def _warm_up(settings: Settings, embedder: ContractEmbedder, reranker: Reranker | None) -> None:
    """Query models load at start-up, not on the first request (blocking: a worker thread)."""
    embedder.warm_up()
    if settings.query_language_routing:
        language_identifier().warm_up()
    if isinstance(reranker, FastembedReranker):
        reranker.warm_up()


def create_app(
    settings: Settings | None = None,
    *,
    embedder: ContractEmbedder | None = None,
    store: ChunkStore | None = None,
    reranker: Reranker | None = None,
    query_model: Model | None = None,
    clock: Clock = time.time,
) -> FastAPI:
    """The retrieval-agent app. Keyword arguments inject ready-made collaborators (tests, ``rag dev``);
    an injected ``store`` stays open, one the lifespan opens is closed on exit. ``query_model`` is the
    LLM of query generation and of the agentic loop (one model, one connection pool per process).
    ``clock`` dates the citation links (their expiry is its time plus CITATION_LINK_TTL_SECONDS).

    ENABLE_AGENTIC_RAG=true without a model (no AGENT_API_BASE_URL) refuses to start
    (ContractConfigError naming AGENT_API_BASE_URL): an agentic deployment that silently ran the
    linear pipeline would hide its misconfiguration.
    """
    settings = settings if settings is not None else get_settings()
    citations = citation_links(settings, clock=clock)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        logger.setLevel(settings.log_level)
        active_store = store if store is not None else open_store(settings)
        active_reranker: Reranker | None = None
        owned_embedder: ContractEmbedder | None = None
        upstream: ChatUpstream | None = None
        passed: UpstreamPassThrough | None = None
        memory_service: MemoryService | None = None
        # The LLM's connection pool, closed with the app (pydantic-ai's shared one never is).
        llm_client = httpx.AsyncClient(timeout=llm_timeout(settings))
        memory_client = httpx.AsyncClient(timeout=httpx.Timeout(settings.memory_timeout, connect=5.0))
        try:
            # Checked before any model loads, like the agent's endpoint below.
            git = find_git() if settings.enable_memory else None
            # Checked before any model loads: a misconfigured agentic deployment fails at once.
            model = query_model if query_model is not None else build_query_model(settings, llm_client)
            if settings.enable_agentic_rag and model is None:
                raise _agent_endpoint_required()
            active_reranker = reranker if reranker is not None else build_reranker(settings)
            active_embedder = embedder
            if active_embedder is None:
                active_embedder = owned_embedder = ContractEmbedder(
                    settings,
                    sparse=settings.hybrid_sparse_queries,
                    dense_threads=settings.query_embedding_threads or None,
                    query_int8=settings.query_int8,
                    # Memory facts are the only documents this service embeds.
                    sparse_queries_only=not settings.enable_memory,
                )
            await anyio.to_thread.run_sync(_warm_up, settings, active_embedder, active_reranker)
            generator = None
            if settings.enable_query_generation and model is not None:
                generator = QueryGenerator(
                    model, timeout=settings.query_generation_timeout, max_queries=settings.max_generated_queries
                )
            elif settings.enable_query_generation:
                logger.info("query generation is on but AGENT_API_BASE_URL is unset: using the last user message")
            search_store = StoreSearch(active_store, settings)
            metrics_ = SearchMetrics()
            # The app's own registry has no process series by default: memory, CPU seconds, open fds.
            ProcessCollector(registry=metrics_.registry)
            app.state.store = search_store
            app.state.metrics = metrics_
            linear = LinearSearch(
                settings,
                store=search_store,
                embedder=active_embedder,
                metrics=metrics_,
                reranker=active_reranker,
                generator=generator,
            )
            app.state.search = linear
            app.state.agent = None
            if settings.enable_agentic_rag and model is not None:
                app.state.agent = AgenticSearch(settings, search=linear, model=model)
                logger.info(
                    "agentic mode: model %s, at most %d retrieve rounds, %.0f s per run",
                    settings.agent_model,
                    settings.agent_max_iterations,
                    settings.agent_timeout,
                )
            app.state.chat = None
            if settings.chat_upstream_base_url is not None:
                # Importing LiteLLM takes about a second: in a thread, at start-up, not on the first chat.
                upstream = await anyio.to_thread.run_sync(ChatUpstream, settings)
                passed = UpstreamPassThrough(settings)
            app.state.passthrough = passed
            memory_service = (
                None
                if git is None
                else build_memory(settings, git, upstream, search_store, active_embedder, metrics_, memory_client)
            )
            app.state.memory = memory_service
            if upstream is not None:
                app.state.chat = ChatService(
                    settings,
                    upstream=upstream,
                    search=linear,
                    store=search_store,
                    metrics=metrics_,
                    memory=memory_service,
                    citations=citations,
                )
            # The MCP sessions run inside the lifespan, so a tool call always finds the search service.
            mcp_running: AbstractAsyncContextManager[None] = (
                nullcontext() if mcp_sessions is None else mcp_sessions.run()
            )
            async with mcp_running:
                yield
        finally:
            if memory_service is not None:
                await memory_service.aclose()
            await memory_client.aclose()
            if active_reranker is not None and reranker is None:
                await active_reranker.aclose()
            if upstream is not None:
                await upstream.aclose()
            if passed is not None:
                await passed.aclose()
            if owned_embedder is not None:
                await anyio.to_thread.run_sync(owned_embedder.close)
            await llm_client.aclose()
            if store is None:
                await close_store(active_store)

    app = FastAPI(title="retrieval-agent", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    # Made from the settings alone: the routes, the chat and the MCP tools sign with this one.
    app.state.citations = citations
    install_error_handlers(app)
    install_edge(app, settings)
    # After the edge, so outside it: its 401 and 413 on /v1 paths are reshaped too.
    install_openai_errors(app)
    app.include_router(health.router)
    app.include_router(search.router)
    # The OpenAPI shows the chat routes only where they work (unconfigured, they answer 503 chat_disabled).
    app.include_router(chat.router, include_in_schema=settings.chat_upstream_base_url is not None)
    app.include_router(passthrough.router, include_in_schema=settings.chat_upstream_base_url is not None)
    app.include_router(metrics.router)
    app.include_router(memory.router, include_in_schema=settings.enable_memory)
    app.include_router(tools.router)
    app.include_router(tools.spec_router)
    mcp_sessions = mount_mcp(app) if settings.enable_mcp else None
    # Last, so outermost: a browser's preflight is answered before the edge asks for the key.
    install_cors(app, settings.cors_origin_list, expose_headers=[ADJUSTED_HEADER])
    return app
