"""The agentic search of one request: the PydanticAI run, its limits, and every way it can end.

Limits live here, in code (the reference stated its iteration cap only in the prompt):

- at most AGENT_MAX_ITERATIONS ``retrieve`` rounds: a call beyond that stops the run
  (``IterationCapReachedError`` from the tool) and what was retrieved is the answer; the model's
  requests are also capped (``UsageLimits``), so a model that loops on the other tools stops too;
- AGENT_TIMEOUT is wall-clock over the whole run (PydanticAI's run timeout): what was retrieved by
  then is returned, not an error.

How a run ends (``agent_requests_total{outcome}``, the ``X-RAG-Agent-Outcome`` header):

- ``answered``: the model stopped after retrieving; ``plain_text``: it wrote queries as text
  instead of calling ``retrieve``, so they are parsed and searched directly (rerank skipped);
- ``iteration_cap`` / ``timeout`` / ``model_error``: the run was stopped or its model failed after
  something was retrieved: that is returned;
- ``fallback``: the model failed (unreachable, an HTTP error, unusable output) or the run stopped
  before anything was retrieved: the linear pipeline answers instead (without the LLM), the
  response says so (``X-RAG-Agent-Fallback: <reason>``), ``agent_fallbacks_total{reason}`` counts
  it and a warning is logged. Never a 500, and never an empty list hiding the failure.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai import Agent, ModelRetry, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import RawToolArgs, WrapModelRequestHandler
from pydantic_ai.exceptions import (
    AgentRunError,
    ModelConnectionError,
    ModelRequestTimeout,
    RunTimedOut,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import UsageLimits
from qdrant_client import models

from rag_runtime.store import match
from retrieval_agent.adapters.llm_failures import log_failure_detail, model_failure
from retrieval_agent.agent.plain_text import parse_queries
from retrieval_agent.agent.prompt import system_prompt, user_prompt
from retrieval_agent.agent.tools import (
    AgentDeps,
    AgentStep,
    IterationCapReachedError,
    RetrieveRound,
    clean_queries,
    list_documents,
    read_document,
    retrieve,
)
from retrieval_agent.metrics import SearchPath
from retrieval_agent.search.pipeline import LinearSearch
from retrieval_agent.search.postprocess import Hit, newest_versions, top_k
from retrieval_agent.search.queries import ChatMessage, last_user_message
from retrieval_agent.settings import Settings
from shared_contract import MetaKey
from shared_contract.attributes import shown_key

logger = logging.getLogger(__name__)

Outcome = Literal["answered", "plain_text", "iteration_cap", "timeout", "model_error", "fallback", "no_query"]
FallbackReason = Literal["model_unreachable", "model_error", "model_bad_output", "timeout", "iteration_cap"]
# Keys a tool call could use to pick a collection; no tool has one, so any of them is refused.
_TENANT_KEYS = ("collection", "tenant", "knowledge")
# Explicit queries read from the request (as in the linear pipeline).
_MAX_REQUEST_QUERIES = 10
# A tool call's JSON arguments: a legitimate one (a few queries, filters of 20 values) is a few KiB;
# more is refused before parsing, so the model's output cannot cost the service more than this.
MAX_TOOL_ARGS_CHARS = 32_000
# The steps' marker when some did not fit the byte budget (the header's size limit).
_TRUNCATED_MARKER_RESERVE = 64


@dataclass(frozen=True, slots=True)
class AgentResult:
    """What the API turns into a response, headers and the ``agent_run`` log line."""

    result_sets: list[list[Hit]]
    outcome: Outcome
    fallback_reason: FallbackReason | None = None
    steps: list[AgentStep] = field(default_factory=lambda: list[AgentStep]())
    iterations: int = 0
    paths: list[SearchPath] = field(default_factory=lambda: list[SearchPath]())

    def steps_json(self, max_chars: int | None = None) -> str:
        """The steps as compact ASCII JSON (a header value), always a valid JSON list.

        With ``max_chars``: the first steps that fit, then ``{"truncated":true,"omitted":N}`` naming
        how many were left out (each step is encoded whole, never cut inside a string).
        """
        encoded = [_compact(step.as_json()) for step in self.steps]
        if max_chars is None or len(encoded) + sum(map(len, encoded)) + 1 <= max_chars:
            return "[" + ",".join(encoded) + "]"
        budget = max_chars - _TRUNCATED_MARKER_RESERVE
        kept: list[str] = []
        used = 1  # the opening bracket
        for item in encoded:
            if used + len(item) + 1 > budget:
                break
            kept.append(item)
            used += len(item) + 1
        kept.append(_compact({"truncated": True, "omitted": len(encoded) - len(kept)}))
        return "[" + ",".join(kept) + "]"


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def _tenant_keys(args: dict[str, Any]) -> list[str]:
    return [key for key in args if any(part in key.casefold() for part in _TENANT_KEYS)]


def strip_tenant_args(args: RawToolArgs) -> tuple[RawToolArgs, list[str]]:
    """``args`` without any key naming a collection (top level or inside ``filters``), and those keys.

    Raises ModelRetry (the model is asked again; after the retries the run falls back as
    ``model_bad_output``) for arguments over MAX_TOOL_ARGS_CHARS or nested too deeply to parse.
    """
    decoded: object = args
    if isinstance(args, str):
        if len(args) > MAX_TOOL_ARGS_CHARS:
            raise ModelRetry(
                f"The arguments are too long ({len(args)} characters, at most {MAX_TOOL_ARGS_CHARS}); "
                "send a short JSON object."
            )
        try:
            decoded = json.loads(args) if args.strip() else {}
        except RecursionError as exc:
            # json.loads recurses per nesting level: "[[[[..." exhausts the stack, not a ValueError.
            raise ModelRetry("The arguments are nested too deeply; send a flat JSON object.") from exc
        except ValueError:
            return args, []  # validation reports the broken JSON to the model
    if not isinstance(decoded, dict):
        return args, []
    cleaned = dict(decoded)
    named = _tenant_keys(cleaned)
    for key in named:
        del cleaned[key]
    inner = cleaned.get("filters")
    if isinstance(inner, dict):
        nested = _tenant_keys(inner)
        if nested:
            cleaned["filters"] = {key: value for key, value in inner.items() if key not in nested}
            named.extend(f"filters.{key}" for key in nested)
    return (cleaned if named else args), named


class RunObserver(AbstractCapability[AgentDeps]):
    """Per-run accounting (model time, requests, tokens) and the tenant guard on tool arguments."""

    async def wrap_model_request(
        self,
        ctx: RunContext[AgentDeps],
        *,
        request_context: ModelRequestContext,
        handler: WrapModelRequestHandler,
    ) -> ModelResponse:
        started = time.perf_counter()
        try:
            response = await handler(request_context)
        except (LookupError, TypeError, AttributeError) as exc:
            # pydantic-ai reads an answer without the fields it expects (``"choices": []``) unguarded;
            # that is the model's bad output (a fallback), not a failure of the search.
            raise UnexpectedModelBehavior(f"the model's answer could not be read ({type(exc).__name__})") from exc
        finally:
            ctx.deps.model_seconds += time.perf_counter() - started
            ctx.deps.model_requests += 1
        ctx.deps.input_tokens += response.usage.input_tokens
        ctx.deps.output_tokens += response.usage.output_tokens
        return response

    async def before_tool_validate(
        self,
        ctx: RunContext[AgentDeps],
        *,
        call: ToolCallPart,  # noqa: ARG002 - the hook's signature
        tool_def: ToolDefinition,
        args: RawToolArgs,
    ) -> RawToolArgs:
        # The tools take no collection, so the schema would reject such a key and the model would retry;
        # dropping it instead searches the request's collections, and the attempt is counted.
        cleaned, named = strip_tenant_args(args)
        if named:
            shown = ", ".join(shown_key(key) for key in named)
            ctx.deps.tenant_violation(tool_def.name, f"argument {shown} ignored")
        return cleaned


def fallback_reason(error: AgentRunError) -> FallbackReason:
    """The ``agent_fallbacks_total`` reason for a failed run."""
    if isinstance(error, ModelConnectionError | ModelRequestTimeout):
        return "model_unreachable"
    if isinstance(error, UnexpectedModelBehavior):
        return "model_bad_output"  # unusable answers, tool arguments still invalid after the retries
    return "model_error"  # ModelAPIError: HTTP errors, rejected requests, rate limits


class AgenticSearch:
    """The agent (built once per app) and the search of one request."""

    def __init__(self, settings: Settings, *, search: LinearSearch, model: Model) -> None:
        self.settings = settings
        self.search = search
        self.metrics = search.metrics
        strict = settings.agent_strict_tools
        self.agent: Agent[AgentDeps, str] = Agent(
            model,
            deps_type=AgentDeps,
            output_type=str,
            instructions=self._instructions,
            tools=[
                Tool(retrieve, strict=strict),
                Tool(read_document, strict=strict),
                Tool(list_documents, strict=strict),
            ],
            capabilities=[RunObserver()],
            retries={"tools": 2, "output": 1},
        )
        # Each retrieve round takes a model turn, and one more may read or list; then the final answer.
        self.limits = UsageLimits(request_limit=2 * settings.agent_max_iterations + 2)
        # One SDK retry: a flaky proxy gets a second chance. The SDK waits out an upstream's Retry-After
        # first (up to 60 s), within AGENT_TIMEOUT: only then does the run fall back.
        self.model_settings = ModelSettings(temperature=0.0, max_retries=1)

    async def _instructions(self) -> str:
        # async: PydanticAI runs a sync instruction function in a worker thread, several times per run.
        return system_prompt(self.settings.agent_system_prompt, max_iterations=self.settings.agent_max_iterations)

    async def run(
        self,
        *,
        queries: Sequence[str] | None,
        messages: Sequence[ChatMessage] | None,
        collection_names: Sequence[str],
        k: int,
        conditions: Sequence[models.Condition] = (),
    ) -> AgentResult:
        """Search for one request; records the agent metrics and logs one ``agent_run`` line.

        ``conditions`` (the request's ``filter``) narrow every tool call and the linear fallback.
        Refused (ContractMismatchError) while the collection's contract disagrees, before the model is asked.
        """
        await self.search.store.check_contract()
        started = time.perf_counter()
        chat = list(messages or [])
        explicit = clean_queries(queries or [], limit=_MAX_REQUEST_QUERIES)
        last_user = last_user_message(chat)
        question = last_user or (explicit[0] if explicit else None)
        if question is None:
            result = AgentResult(result_sets=[[]], outcome="no_query")
            self._record(result, None, started)
            return result
        # Open WebUI's bypass mode repeats the last user message as the query: nothing extra asked.
        asked = [] if explicit == [" ".join(question.split())] and chat else explicit
        history = chat[-self.settings.agent_conversation_history_messages :]
        deps = AgentDeps(
            search=self.search,
            settings=self.settings,
            collection_names=tuple(collection_names),
            k=k,
            question=question,
            conditions=tuple(conditions),
        )
        result = await self._run(deps, user_prompt(history, asked), queries, messages)
        self._record(result, deps, started)
        return result

    async def _run(
        self,
        deps: AgentDeps,
        prompt: str,
        queries: Sequence[str] | None,
        messages: Sequence[ChatMessage] | None,
    ) -> AgentResult:
        outcome: Outcome
        reason: FallbackReason | None = None
        try:
            with self.metrics.time_stage("agent_loop"):
                run = await self.agent.run(
                    prompt,
                    deps=deps,
                    usage_limits=self.limits,
                    timeout=self.settings.agent_timeout,
                    model_settings=self.model_settings,
                )
        except (IterationCapReachedError, UsageLimitExceeded):
            outcome, reason = "iteration_cap", "iteration_cap"
        except RunTimedOut:
            outcome, reason = "timeout", "timeout"
        except AgentRunError as exc:
            outcome, reason = "model_error", fallback_reason(exc)
            # Type and status only: an upstream error's text can echo the prompt and the user's words.
            logger.warning("agent model failed (%s): %s", reason, model_failure(exc))
            log_failure_detail(logger, "agent model failure", exc)
        else:
            if deps.rounds or deps.documents:
                outcome = "answered"
            else:
                await self._direct_search(deps, run.output)
                return self._result(deps, "plain_text", await self._collect(deps))
        if not deps.rounds and not deps.documents:
            assert reason is not None
            return await self._fallback(deps, reason, queries, messages)
        return self._result(deps, outcome, await self._collect(deps))

    async def _direct_search(self, deps: AgentDeps, text: str) -> None:
        """Queries the model wrote as text, searched directly (rerank skipped), as one round."""
        started = time.perf_counter()
        parsed = parse_queries(text)
        if self.settings.agent_include_raw_query or not parsed:
            parsed = clean_queries([*parsed, deps.question], limit=len(parsed) + 1)
        lists = await self.search.retrieve_all(parsed, deps.collection_names, deps.k, conditions=deps.conditions)
        merged = self.search.merge([item.hits for item in lists], deps.k)
        hits = await self.search.finish(
            merged,
            deps.question,
            deps.k,
            collection_names=deps.collection_names,
            conditions=deps.conditions,
            rerank_hits=False,
        )
        deps.rounds.append(
            RetrieveRound(
                number=len(deps.rounds) + 1, queries=parsed, hits=hits, paths=[i.path for i in lists], direct=True
            )
        )
        deps.step("plain_text", {"queries": parsed}, len(hits), started)

    async def _fallback(
        self,
        deps: AgentDeps,
        reason: FallbackReason,
        queries: Sequence[str] | None,
        messages: Sequence[ChatMessage] | None,
    ) -> AgentResult:
        """The linear pipeline answers (without the LLM, which just failed or ran out of time)."""
        self.metrics.agent_fallbacks.labels(reason=reason).inc()
        logger.warning("agentic search fell back to the linear pipeline (%s)", reason)
        outcome = await self.search.search(
            queries=queries,
            messages=messages,
            collection_names=deps.collection_names,
            k=deps.k,
            use_generator=False,
            conditions=deps.conditions,
        )
        deps.steps.append(AgentStep("linear_fallback", {"reason": reason}, len(outcome.result_sets[0]), 0.0))
        return AgentResult(
            result_sets=outcome.result_sets,
            outcome="fallback",
            fallback_reason=reason,
            steps=deps.steps,
            iterations=len(deps.rounds),
            paths=outcome.paths,
        )

    def _result(self, deps: AgentDeps, outcome: Outcome, hits: list[Hit]) -> AgentResult:
        return AgentResult(
            result_sets=[hits],
            outcome=outcome,
            steps=deps.steps,
            iterations=sum(1 for item in deps.rounds if not item.direct),
            paths=[path for item in deps.rounds for path in item.paths],
        )

    async def _collect(self, deps: AgentDeps) -> list[Hit]:
        """The response's one list from the side channel: whole documents and chunks, deduplicated, k.

        One round and no document: that round's list as ranked (exactly what the linear pipeline
        would order). Otherwise by calibrated relevance, the one scale shared by every round and
        path; a whole document ranks with its best chunk's relevance, and chunks it contains go.
        """
        documents = list(deps.documents.values())
        if len(deps.rounds) == 1 and not documents:
            return top_k(deps.rounds[0].hits, deps.k)
        best: dict[str, tuple[int, Hit]] = {}
        for item in deps.rounds:
            for hit in item.hits:
                known = best.get(hit.content_hash)
                if known is None:
                    best[hit.content_hash] = (len(best), hit)
                elif hit.relevance > known[1].relevance:
                    best[hit.content_hash] = (known[0], hit)
        chunks = [hit for _, hit in best.values()]
        ranked: list[tuple[float, int, int, Hit]] = []
        for document in documents:
            related = [
                hit.relevance
                for hit in chunks
                if hit.meta.get(MetaKey.FILE_ID) == document.file_id
                and hit.meta.get(MetaKey.COLLECTION_NAME) == document.collection_name
            ]
            relevance = (
                max(related)
                if related
                else await self._document_relevance(deps, document.file_id, document.collection_name)
            )
            hit = Hit(
                point_id=f"document:{document.collection_name}:{document.file_id}",
                content=document.text,
                meta=document.meta,
                score=relevance,
                relevance=relevance,
            )
            ranked.append((-relevance, 0, len(ranked), hit))
        texts = [document.text for document in documents]
        for order, hit in best.values():
            if any(hit.content in text for text in texts):
                continue
            ranked.append((-hit.relevance, 1, order, hit))
        ranked.sort(key=lambda item: item[:3])
        return top_k(newest_versions([item[3] for item in ranked]), deps.k)

    async def _document_relevance(self, deps: AgentDeps, file_id: str, collection_name: str) -> float:
        """A document never retrieved (read from a listing): its best chunk's relevance to the question."""
        found = await self.search.retrieve(
            deps.question, [collection_name], 1, conditions=[match(MetaKey.FILE_ID, file_id), *deps.conditions]
        )
        return found.hits[0].relevance if found.hits else 0.0

    def _record(self, result: AgentResult, deps: AgentDeps | None, started: float) -> None:
        metrics = self.metrics
        metrics.agent_requests.labels(outcome=result.outcome).inc()
        metrics.agent_iterations.observe(result.iterations)
        fields: dict[str, Any] = {
            "outcome": result.outcome,
            "fallback_reason": result.fallback_reason,
            "iterations": result.iterations,
            "hits": len(result.result_sets[0]) if result.result_sets else 0,
            "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
        }
        if deps is not None:
            metrics.agent_model_tokens.labels(direction="input").inc(deps.input_tokens)
            metrics.agent_model_tokens.labels(direction="output").inc(deps.output_tokens)
            metrics.agent_model_seconds.observe(deps.model_seconds)
            fields.update(
                tool_calls=dict(deps.tool_calls),
                model_requests=deps.model_requests,
                model_ms=round(deps.model_seconds * 1000, 1),
                tokens_in=deps.input_tokens,
                tokens_out=deps.output_tokens,
                tenant_violations=deps.tenant_violations,
                documents_read=len(deps.documents),
            )
        logger.info("agent_run", extra=fields)
