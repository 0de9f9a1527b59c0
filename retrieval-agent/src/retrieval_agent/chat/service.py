"""One chat turn: pick the knowledge bases, retrieve, inject the numbered passages, then let the upstream
model answer, running the RAG tools it calls (at most CHAT_MAX_TOOL_ROUNDS rounds, then one last call
without them, whose answer must have text: calls alone then are a 502 ``upstream_error``). Tools the client
sent are the client's: a call to one is returned, never run here.

Streaming streams every round; tool-call deltas are gathered until the round ends, and text that comes
after a tool call started is held until the round proves final. Open WebUI's ``source`` events (chunks
with an ``event`` and no choices) follow the role chunk, and each tool round that found new passages;
``rag_sources`` goes in a last chunk
before ``data: [DONE]``, with ``usage`` summed over the rounds when the client sent
``stream_options.include_usage`` (as OpenAI's last chunk). A round whose stream carried neither text
nor a tool call is asked once more without streaming: some upstreams answer ``stream: true`` with a
whole JSON completion, which LiteLLM reads as an empty stream. A round whose stream carried an answer
but ended without a finish_reason was cut off: an error event, never a finished answer.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio

from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.chat.catalog import list_models, split_model
from retrieval_agent.chat.chunks import DONE, ChatCompletionChunk, ChunkChoice, ChunkDelta, ToolCallDelta
from retrieval_agent.chat.context import SourceBook, context_message, search_messages, source_events
from retrieval_agent.chat.errors import (
    INVALID_KNOWLEDGE_BASE,
    KNOWLEDGE_BASE_NOT_FOUND,
    ChatError,
    ChatOutcome,
    invalid_request,
    openai_error,
)
from retrieval_agent.chat.memory import memory_message, memory_sources, recall_text, user_turn
from retrieval_agent.chat.models import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionRequest,
    Choice,
    MemorySource,
    ModelList,
    Usage,
)
from retrieval_agent.chat.rounds import StreamedRound, ToolCall, first_choice, one_chunk, tool_calls_of
from retrieval_agent.chat.tools import RagTools
from retrieval_agent.chat.turn import ChatTurn, insert_system
from retrieval_agent.chat.upstream import ChatUpstream, unfinished_stream
from retrieval_agent.memory.service import MemoryService, Speaker
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.citations import CitationLinks
from retrieval_agent.search.pipeline import LinearSearch
from retrieval_agent.settings import Settings
from shared_contract.names import check_collection_name
from shared_contract.schema import MEMORY_TENANT_RULE, tenant_kind

logger = logging.getLogger(__name__)

_LAST_ROUND_NOTE = "(That was the last tool round: no more tool calls. Answer now from the passages above.)"


class ChatService:
    """/v1/chat/completions and /v1/models over the linear search and the upstream model; one per app."""

    def __init__(
        self,
        settings: Settings,
        *,
        upstream: ChatUpstream,
        search: LinearSearch,
        store: StoreSearch,
        metrics: SearchMetrics,
        memory: MemoryService | None = None,
        citations: CitationLinks | None = None,
    ) -> None:
        self.settings = settings
        self.citations = citations
        self.upstream = upstream
        self.search = search
        self.store = store
        self.metrics = metrics
        self.memory = memory

    def observe(self, outcome: ChatOutcome, *, stream: bool, started: float | None = None) -> None:
        """Count one chat request (and its duration when it ran)."""
        label = "true" if stream else "false"
        self.metrics.chat_requests.labels(outcome=outcome, stream=label).inc()
        if started is not None:
            self.metrics.chat_duration.labels(stream=label).observe(time.perf_counter() - started)

    # -- the turn ---------------------------------------------------------------------------------

    def knowledge_bases_of(self, request: ChatCompletionRequest) -> tuple[str, list[str]]:
        """The upstream model and the knowledge bases: ``collection_names`` when sent, else the name's suffix."""
        model, suffix = split_model(request.model)
        if not model:
            raise invalid_request("model: the model name before '@' is empty.", param="model")
        explicit = bool(request.collection_names)
        names = list(dict.fromkeys(request.collection_names if request.collection_names else suffix))
        param = "collection_names" if explicit else "model"
        for name in names:
            try:
                check_collection_name(name, field="each knowledge base name")
            except ValueError as exc:
                raise invalid_request(f"{param}: {exc}", param=param, code=INVALID_KNOWLEDGE_BASE) from None
            if tenant_kind(name) == "memory":
                raise invalid_request(f"{param}: {MEMORY_TENANT_RULE}", param=param, code=INVALID_KNOWLEDGE_BASE)
        allowed = self.settings.chat_knowledge_base_list
        refused = [name for name in names if allowed is not None and name not in allowed]
        if refused:
            raise ChatError(
                404,
                f"Unknown knowledge base {refused[0]!r}: GET /v1/models lists the ones chat may search.",
                code=KNOWLEDGE_BASE_NOT_FOUND,
                outcome="invalid_request",
                param=param,
            )
        return model, names

    async def prepare(self, request: ChatCompletionRequest, speaker: Speaker | None = None) -> ChatTurn:
        """Validate, retrieve and build the augmented messages (nothing is sent upstream yet). With memory
        and a ``speaker``, the user's facts are recalled into a system message and the user's new message
        is scheduled for reconciliation."""
        model, names = self.knowledge_bases_of(request)
        settings = self.settings
        messages = [message.model_dump(exclude_unset=True) for message in request.messages]
        book = SourceBook(self.citations)
        rag_tools: RagTools | None = None
        if names:
            k = request.rag_top_k or settings.chat_context_k
            if settings.chat_rag_tools and request.rag_enable_tools is not False:
                rag_tools = RagTools(
                    self.search,
                    names,
                    book,
                    k=k,
                    document_max_chars=settings.agent_document_max_chars,
                    metrics=self.metrics,
                )
            outcome = await self.search.search(
                queries=None, messages=search_messages(request.messages, k), collection_names=names, k=k
            )
            for hit in outcome.result_sets[0] if outcome.result_sets else []:
                book.add(hit)
            context, shown = context_message(book.sources, tools=rag_tools is not None)
            book.keep(shown)
            if shown or rag_tools is not None:
                insert_system(messages, context)
        remembered: list[MemorySource] = []
        if self.memory is not None and speaker is not None:
            remembered = memory_sources(await self.memory.recall(speaker, recall_text(request.messages)))
            if remembered:
                insert_system(messages, memory_message(remembered))
            said, earlier = user_turn(request.messages)
            self.memory.remember(speaker, said, context=earlier)
        return ChatTurn(
            model=request.model,
            upstream_model=model,
            messages=messages,
            book=book,
            rag_tools=rag_tools,
            max_tool_rounds=settings.chat_max_tool_rounds,
            params=request.forwarded_params(),
            client_tools=list(request.tools or []),
            tool_choice=request.tool_choice if request.tools else None,
            memory_sources=remembered,
            include_usage=request.include_usage,
        )

    async def _run_tools(self, turn: ChatTurn, content: str | None, calls: Sequence[ToolCall], rounds: int) -> None:
        """Run round ``rounds``' calls of our tools and append the exchange to the turn's messages. After
        the last round the model is told, in the last result, to answer now (a note there fits every chat
        template; a late system or user turn does not)."""
        assert turn.rag_tools is not None
        turn.messages.append({"role": "assistant", "content": content, "tool_calls": list(calls)})
        for call in calls:
            result = await turn.rag_tools.run(call["function"]["name"], call["function"].get("arguments", ""))
            turn.messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        if not turn.offers_rag_tools(rounds + 1):
            turn.messages[-1]["content"] += f"\n\n{_LAST_ROUND_NOTE}"

    # -- whole answers ----------------------------------------------------------------------------

    async def complete(self, request: ChatCompletionRequest, speaker: Speaker | None = None) -> ChatCompletion:
        """The whole answer, with ``rag_sources`` (and ``memory_sources``). Raises ChatError (or a
        store/embedder error)."""
        started = time.perf_counter()
        try:
            turn = await self.prepare(request, speaker)
            completion = await self._complete(turn)
        except ChatError as exc:
            self.observe(exc.outcome, stream=False, started=started)
            raise
        except Exception:
            self.observe("error", stream=False, started=started)
            raise
        outcome: ChatOutcome = "client_tool_calls" if completion.choices[0].finish_reason == "tool_calls" else "ok"
        self.observe(outcome, stream=False, started=started)
        return completion

    async def _complete(self, turn: ChatTurn) -> ChatCompletion:
        usage = Usage()
        rounds = 0
        while True:
            answer = await self._ask_whole(turn, rounds)
            usage.add(answer.get("usage"))
            choice, message = first_choice(answer)
            content = message.get("content") if isinstance(message.get("content"), str) else None
            asked = tool_calls_of(message.get("tool_calls"))
            kind, calls = turn.decide(asked, rounds)
            if kind == "server":
                await self._run_tools(turn, content, calls, rounds)
                rounds += 1
                continue
            finish = choice.get("finish_reason")
            if kind == "client":
                reply, finish = AssistantMessage(content=content, tool_calls=calls), "tool_calls"
            else:
                turn.check_answered(bool(content), asked, rounds)
                reply = AssistantMessage(content=content)
                finish = "stop" if finish in (None, "tool_calls") else str(finish)
            return ChatCompletion(
                id=f"chatcmpl-{uuid.uuid4().hex}",
                created=int(time.time()),
                model=turn.model,
                choices=[Choice(message=reply, finish_reason=finish)],
                usage=usage,
                rag_sources=list(turn.book.sources),
                memory_sources=list(turn.memory_sources),
            )

    # -- streams ----------------------------------------------------------------------------------

    async def stream(self, request: ChatCompletionRequest, speaker: Speaker | None = None) -> AsyncIterator[str]:
        """The answer as SSE events. Validation, retrieval and the first upstream request happen here, so
        their failures are an HTTP error; later ones are an ``error`` event ending the stream."""
        started = time.perf_counter()
        try:
            turn = await self.prepare(request, speaker)
            first = await self.upstream.stream(
                turn.upstream_model,
                turn.messages,
                tools=turn.tools(0),
                tool_choice=turn.tool_choice,
                params=turn.stream_params,
            )
        except ChatError as exc:
            self.observe(exc.outcome, stream=True, started=started)
            raise
        except Exception:
            self.observe("error", stream=True, started=started)
            raise
        return self._events(turn, first, started)

    async def _events(self, turn: ChatTurn, first: AsyncIterator[dict[str, Any]], started: float) -> AsyncIterator[str]:
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())

        def event(delta: ChunkDelta | None, finish: str | None = None, **extra: Any) -> str:
            choices = [] if delta is None else [ChunkChoice(delta=delta, finish_reason=finish)]
            return ChatCompletionChunk(
                id=completion_id, created=created, model=turn.model, choices=choices, **extra
            ).sse()

        def announce(first_new: int) -> str:
            """The source events of the sources from ``first_new`` on (Open WebUI's citations)."""
            return "".join(event(None, event=source) for source in source_events(turn.book.sources[first_new:]))

        outcome: ChatOutcome = "ok"
        usage = Usage()
        try:
            yield event(ChunkDelta(role="assistant", content=""))
            # Open WebUI shows these as the message's citations (it drops the last chunk's rag_sources).
            yield announce(0)
            announced = len(turn.book.sources)
            stream, rounds, asked_whole = first, 0, False
            while True:
                streamed = StreamedRound()
                async for part in stream:
                    usage.add(part.get("usage"))
                    for content in streamed.take(part):
                        yield event(ChunkDelta(content=content))
                if not streamed.said and not asked_whole:
                    asked_whole = True
                    stream = await self._whole_round(turn, rounds)
                    continue
                if streamed.finish is None and not asked_whole:
                    # The connection closed mid-answer: what was sent is not the whole answer.
                    raise unfinished_stream()
                asked_whole = False
                held, finish = streamed.held, streamed.finish
                asked = streamed.tool_calls()
                kind, calls = turn.decide(asked, rounds)
                if kind == "server":
                    await self._run_tools(turn, "".join(held) or None, calls, rounds)
                    yield announce(announced)
                    announced = len(turn.book.sources)
                    rounds += 1
                    stream = await self.upstream.stream(
                        turn.upstream_model,
                        turn.messages,
                        tools=turn.tools(rounds),
                        tool_choice=turn.tool_choice,
                        params=turn.stream_params,
                    )
                    continue
                if kind == "answer":
                    turn.check_answered(streamed.wrote, asked, rounds)
                if held:
                    yield event(ChunkDelta(content="".join(held)))
                if kind == "client":
                    outcome = "client_tool_calls"
                    deltas = [
                        ToolCallDelta.model_validate({"index": index, **call}) for index, call in enumerate(calls)
                    ]
                    yield event(ChunkDelta(tool_calls=deltas))
                    yield event(ChunkDelta(), "tool_calls")
                else:
                    yield event(ChunkDelta(), "stop" if finish in (None, "tool_calls") else finish)
                break
            yield event(
                None,
                rag_sources=list(turn.book.sources),
                memory_sources=list(turn.memory_sources),
                usage=usage if turn.include_usage else None,
            )
            yield f"data: {DONE}\n\n"
        except ChatError as exc:
            outcome = exc.outcome
            logger.warning("chat stream failed: %s", exc.message)
            yield f"data: {json.dumps(exc.body())}\n\n"
        except (GeneratorExit, anyio.get_cancelled_exc_class()):
            outcome = "disconnected"
            raise
        except Exception:
            outcome = "error"
            logger.exception("chat stream failed")
            yield f"data: {json.dumps(openai_error('The chat stream failed.', 'api_error', 'chat_failed'))}\n\n"
        finally:
            self.observe(outcome, stream=True, started=started)

    async def _whole_round(self, turn: ChatTurn, rounds: int) -> AsyncIterator[dict[str, Any]]:
        """The round asked again without streaming, its answer as one stream chunk."""
        self.metrics.chat_stream_fallbacks.inc()
        logger.warning(
            "the upstream's stream for %s carried no answer; asking again without streaming", turn.upstream_model
        )
        return one_chunk(await self._ask_whole(turn, rounds))

    async def _ask_whole(self, turn: ChatTurn, rounds: int) -> dict[str, Any]:
        """One round's whole (unstreamed) completion."""
        return await self.upstream.complete(
            turn.upstream_model,
            turn.messages,
            tools=turn.tools(rounds),
            tool_choice=turn.tool_choice,
            params=turn.params,
        )

    # -- models -----------------------------------------------------------------------------------

    async def models(self) -> ModelList:
        """GET /v1/models (``chat/catalog.py``: what a person can choose from)."""
        return await list_models(self.settings, self.upstream, self.store)
