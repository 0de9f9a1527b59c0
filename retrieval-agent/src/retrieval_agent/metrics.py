"""Prometheus series of one app, in its own registry (two apps can share a process in ``rag dev``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

Stage = Literal["query_generation", "embed", "qdrant", "bm25", "rerank", "windows", "agent_loop", "total"]
SearchPath = Literal["native_hybrid", "bm25_fallback", "dense"]

_STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class SearchMetrics:
    """The series the search pipeline and the API record."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "search_requests_total", "Search requests by outcome and code.", ["outcome", "code"], registry=self.registry
        )
        self.duration = Histogram(
            "search_duration_seconds", "Wall time of /search.", buckets=_STAGE_BUCKETS, registry=self.registry
        )
        self.stage_duration = Histogram(
            "retrieval_stage_duration_seconds",
            "Wall time per pipeline stage (embed: per query; qdrant: per store call).",
            ["stage"],
            buckets=_STAGE_BUCKETS,
            registry=self.registry,
        )
        self.path = Counter("search_path_total", "Retrieval path taken per query.", ["path"], registry=self.registry)
        self.reranker_failures = Counter(
            "reranker_failures_total",
            "Reranker calls that failed (results returned unranked).",
            ["reason"],
            registry=self.registry,
        )
        self.request_adjustments = Counter(
            "search_request_adjustments_total",
            "Search requests brought within the limits (truncated text, list content, trimmed chat, clamped k).",
            ["adjustment"],
            registry=self.registry,
        )
        self.follow_ups = Counter(
            "search_follow_ups_total",
            "Follow-up turns searched with the previous user turn (no LLM rewrote them).",
            registry=self.registry,
        )
        self.query_generation_fallbacks = Counter(
            "query_generation_fallbacks_total",
            "Query generations that failed and fell back to the last user message.",
            ["reason"],
            registry=self.registry,
        )
        self.lexical_retries = Counter(
            "lexical_retries_total",
            "Hybrid queries re-run without their BM25 legs because the store lacked a text index.",
            registry=self.registry,
        )
        self.dedup_refetches = Counter(
            "dedup_refetches_total",
            "Searches fetched again, deeper, because identical texts left fewer than k distinct hits.",
            registry=self.registry,
        )
        self.bm25_cache = Counter(
            "bm25_cache_total", "Client-side BM25 corpus cache lookups.", ["result"], registry=self.registry
        )
        # Agentic mode (one observation per /search the agent handled).
        self.agent_requests = Counter(
            "agent_requests_total",
            "Agentic searches by outcome (answered, plain_text, iteration_cap, timeout, model_error, fallback, "
            "no_query).",
            ["outcome"],
            registry=self.registry,
        )
        self.agent_iterations = Histogram(
            "agent_iterations",
            "Retrieve rounds per agentic search.",
            buckets=(0, 1, 2, 3, 4, 5, 7, 10),
            registry=self.registry,
        )
        self.agent_tool_calls = Counter(
            "agent_tool_calls_total", "Tool calls the agent made, by tool.", ["tool"], registry=self.registry
        )
        self.agent_model_tokens = Counter(
            "agent_model_tokens_total",
            "Tokens the agent's model reported, by direction (input, output).",
            ["direction"],
            registry=self.registry,
        )
        self.agent_model_seconds = Histogram(
            "agent_model_seconds",
            "Time spent waiting for the agent's model per search (all its requests).",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
            registry=self.registry,
        )
        self.agent_fallbacks = Counter(
            "agent_fallbacks_total",
            "Agentic searches answered by the linear pipeline instead, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.agent_tenant_violations = Counter(
            "agent_tenant_violations_total",
            "Tool calls that named a collection or reached for a document outside the request's collections "
            "(refused; nothing outside them is read).",
            registry=self.registry,
        )
        # OpenAI-compatible chat (/v1/chat/completions).
        self.chat_requests = Counter(
            "chat_requests_total",
            "Chat completions by outcome (ok, client_tool_calls, invalid_request, disabled, upstream_error, error) "
            "and whether they streamed.",
            ["outcome", "stream"],
            registry=self.registry,
        )
        self.chat_duration = Histogram(
            "chat_duration_seconds",
            "Wall time of one chat completion (retrieval, tool rounds and the upstream; a stream until its end).",
            ["stream"],
            buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0),
            registry=self.registry,
        )
        self.chat_stream_fallbacks = Counter(
            "chat_stream_fallbacks_total",
            "Streamed rounds whose upstream stream carried no answer, asked again without streaming.",
            registry=self.registry,
        )
        self.chat_tool_calls = Counter(
            "chat_tool_calls_total", "RAG tool calls the chat model made, by tool.", ["tool"], registry=self.registry
        )
        self.proxy_requests = Counter(
            "proxy_requests_total",
            "Other /v1 requests passed to the chat upstream, by outcome (ok, upstream_status: its 4xx/5xx passed "
            "on, upstream_error: unreachable, too slow or too large, invalid_request, disabled).",
            ["outcome"],
            registry=self.registry,
        )
        # Long-term memory (ENABLE_MEMORY).
        self.memory_recall_duration = Histogram(
            "memory_recall_duration_seconds",
            "Memory's share of a chat turn: waiting for earlier reconciliations, picking up hand edits, ranking.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
            registry=self.registry,
        )
        self.memory_reconciliations = Counter(
            "memory_reconciliations_total",
            "Reconciliations of a user message by outcome (applied, no_facts, no_change, malformed, model_error, "
            "error).",
            ["outcome"],
            registry=self.registry,
        )
        self.memory_reconcile_duration = Histogram(
            "memory_reconcile_duration_seconds",
            "Wall time of one background reconciliation (both model calls, file writes, commits, indexing).",
            buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
            registry=self.registry,
        )
        self.memory_operations = Counter(
            "memory_operations_total",
            "Facts added, updated or deleted (by reconciliation or the memory API).",
            ["action"],
            registry=self.registry,
        )
        self.memory_index_changes = Counter(
            "memory_index_changes_total",
            "Fact points written or removed to make the index match the memory folders (hand edits included).",
            registry=self.registry,
        )
        self.memory_files_refused = Counter(
            "memory_files_refused_total",
            "Files in a memory folder never read, by reason (link: a symbolic link; not_a_file: a FIFO, device "
            "or folder named *.md), counted each time the folder is indexed.",
            ["reason"],
            registry=self.registry,
        )
        self.results_returned = Histogram(
            "results_returned",
            "Hits in the first result set.",
            buckets=(0, 1, 3, 5, 10, 20, 50, 100),
            registry=self.registry,
        )

    @contextmanager
    def time_stage(self, stage: Stage) -> Iterator[None]:
        """Record the wall time of the enclosed block under ``stage``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.stage_duration.labels(stage=stage).observe(time.perf_counter() - started)

    def render(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)
