"""One chat turn: pick the knowledge bases, retrieve, inject the numbered passages, then let the upstream
model answer, running the RAG tools it calls (at most CHAT_MAX_TOOL_ROUNDS rounds, then one last call
without them, whose answer must have text: calls alone then are a 502 ``upstream_error``). Tools the client
sent are the client's: a call to one is returned, never run here.

Streaming streams every round; tool-call deltas are gathered until the round ends, and text that comes
after a tool call started is held until the round proves final. ``rag_sources`` goes in a last chunk
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
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from rag_runtime.store import KNOWLEDGE_BASES
from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.chat.context import SourceBook, context_message, search_messages
from retrieval_agent.chat.errors import (
    INVALID_KNOWLEDGE_BASE,
    KNOWLEDGE_BASE_NOT_FOUND,
    UPSTREAM_ERROR,
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
    ModelCard,
    ModelList,
    Usage,
)
from retrieval_agent.chat.tools import RagTools, tool_schemas
from retrieval_agent.chat.upstream import ChatUpstream, unfinished_stream
from retrieval_agent.memory.service import MemoryService, Speaker
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.pipeline import LinearSearch
from retrieval_agent.settings import Settings
from shared_contract import CollectionMissingError
from shared_contract.names import check_collection_name
from shared_contract.schema import MEMORY_TENANT_RULE, tenant_kind

logger = logging.getLogger(__name__)

KB_SEPARATOR = "@"
KB_JOINER = "+"
# Open WebUI's per-file and memory tenants are not knowledge bases to offer as models.
_MAX_TENANTS = 10_000
_LAST_ROUND_NOTE = "(That was the last tool round: no more tool calls. Answer now from the passages above.)"

ToolCall = dict[str, Any]


def split_model(model: str) -> tuple[str, list[str]]:
    """``gpt-4o-mini@kb1+kb2`` -> (``gpt-4o-mini``, [kb1, kb2]); a name without ``@`` names no knowledge base."""
    name, separator, suffix = model.rpartition(KB_SEPARATOR)
    if not separator:
        return model, []
    return name, suffix.split(KB_JOINER)


def _tool_calls(raw: object) -> list[ToolCall]:
    """An answer's tool calls in OpenAI's request shape (ids made up where the upstream sent none)."""
    calls: list[ToolCall] = []
    for index, item in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(item, dict):
            continue
        function = item.get("function") if isinstance(item.get("function"), dict) else {}
        assert isinstance(function, dict)
        calls.append(
            {
                "id": str(item.get("id") or f"call_{uuid.uuid4().hex[:12]}_{index}"),
                "type": "function",
                "function": {
                    "name": str(function.get("name") or ""),
                    "arguments": str(function.get("arguments") or ""),
                },
            }
        )
    return calls


def _accumulate(calls: dict[int, ToolCall], delta: object) -> None:
    """Add one streamed tool-call delta (id and name come once, the arguments in pieces)."""
    if not isinstance(delta, dict):
        return
    index = delta.get("index")
    slot = calls.setdefault(index if isinstance(index, int) else len(calls), {"id": None, "function": {}})
    if delta.get("id"):
        slot["id"] = delta["id"]
    function = delta.get("function")
    if isinstance(function, dict):
        if function.get("name"):
            slot["function"]["name"] = function["name"]
        if function.get("arguments"):
            slot["function"]["arguments"] = slot["function"].get("arguments", "") + function["arguments"]


@dataclass
class StreamedRound:
    """One streamed round as it comes in: tool-call deltas gathered, text after a tool call held."""

    gathered: dict[int, ToolCall] = field(default_factory=lambda: dict[int, ToolCall]())
    held: list[str] = field(default_factory=lambda: list[str]())
    finish: str | None = None
    said: bool = False  # any text or tool call at all
    wrote: bool = False  # any text

    def take(self, part: dict[str, Any]) -> list[str]:
        """Read one chunk; returns the text to send on now."""
        now: list[str] = []
        for choice in part.get("choices") or []:
            delta = choice.get("delta") or {}
            for call_delta in delta.get("tool_calls") or []:
                _accumulate(self.gathered, call_delta)
                self.said = True
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.said = self.wrote = True
                if self.gathered:
                    self.held.append(content)  # text of a round that may not be the last
                else:
                    now.append(content)
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])
        return now

    def tool_calls(self) -> list[ToolCall]:
        return _tool_calls([self.gathered[index] for index in sorted(self.gathered)])


def _first_choice(answer: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A whole completion's first choice and its message (empty where the upstream sent none)."""
    choices = answer.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message")
    return choice, message if isinstance(message, dict) else {}


async def _one_chunk(answer: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """A whole completion as the one chunk of a stream (its tool calls as complete deltas)."""
    choice, message = _first_choice(answer)
    calls = [{"index": index, **call} for index, call in enumerate(_tool_calls(message.get("tool_calls")))]
    delta = {"content": message.get("content"), "tool_calls": calls}
    yield {
        "choices": [{"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason")}],
        "usage": answer.get("usage"),
    }


def _insert_system(messages: list[dict[str, Any]], content: str) -> None:
    """A system message after the client's own system messages: some chat templates refuse a system
    turn later on."""
    at = next((i for i, message in enumerate(messages) if message.get("role") != "system"), len(messages))
    messages.insert(at, {"role": "system", "content": content})


@dataclass
class ChatTurn:
    """One request, prepared: the upstream model, the augmented messages, the tools and the sources."""

    model: str
    upstream_model: str
    messages: list[dict[str, Any]]
    book: SourceBook
    rag_tools: RagTools | None
    max_tool_rounds: int
    params: dict[str, Any]
    client_tools: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())
    tool_choice: Any = None
    memory_sources: list[MemorySource] = field(default_factory=lambda: list[MemorySource]())
    include_usage: bool = False

    @property
    def stream_params(self) -> dict[str, Any]:
        """A streamed call's parameters: the upstream reports usage only when asked."""
        return {**self.params, "stream_options": {"include_usage": True}} if self.include_usage else self.params

    @property
    def client_tool_names(self) -> frozenset[str]:
        names = (tool.get("function", {}).get("name") for tool in self.client_tools if isinstance(tool, dict))
        return frozenset(name for name in names if isinstance(name, str))

    def offers_rag_tools(self, rounds: int) -> bool:
        return self.rag_tools is not None and rounds < self.max_tool_rounds

    def check_answered(self, wrote: bool, calls: Sequence[ToolCall], rounds: int) -> None:
        """A final answer that is only calls to tools not offered (ours after the cap, or none at all)
        is no answer: an upstream error, not an empty reply that reads as finished."""
        if calls and not wrote:
            names = ", ".join(sorted({call["function"]["name"] for call in calls}))
            capped = self.rag_tools is not None and rounds >= self.max_tool_rounds > 0
            after = f" after CHAT_MAX_TOOL_ROUNDS={self.max_tool_rounds} tool rounds" if capped else ""
            raise ChatError(
                502,
                f"The upstream model answered only with calls to tools it was not offered ({names}){after}, "
                "not with an answer.",
                code=UPSTREAM_ERROR,
                outcome="upstream_error",
            )

    def tools(self, rounds: int) -> list[dict[str, Any]] | None:
        """What the model may call in this round: the client's tools, and ours until the cap (a client tool
        of the same name wins)."""
        tools = list(self.client_tools)
        if self.offers_rag_tools(rounds):
            taken = self.client_tool_names
            tools.extend(tool for tool in tool_schemas() if tool["function"]["name"] not in taken)
        return tools or None

    def decide(
        self, calls: Sequence[ToolCall], rounds: int
    ) -> tuple[Literal["client", "server", "answer"], list[ToolCall]]:
        """What an answer's tool calls mean: calls of client tools go back to the client; else, while our
        tools are offered, every call is run here (an unknown name gets an error result); else it is the answer."""
        client = [call for call in calls if call["function"]["name"] in self.client_tool_names]
        if client:
            return "client", client
        if calls and self.offers_rag_tools(rounds):
            return "server", list(calls)
        return "answer", []


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
    ) -> None:
        self.settings = settings
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
        book = SourceBook()
        rag_tools: RagTools | None = None
        if names:
            k = settings.chat_context_k
            if settings.chat_rag_tools:
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
                _insert_system(messages, context)
        remembered: list[MemorySource] = []
        if self.memory is not None and speaker is not None:
            remembered = memory_sources(await self.memory.recall(speaker, recall_text(request.messages)))
            if remembered:
                _insert_system(messages, memory_message(remembered))
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
            choice, message = _first_choice(answer)
            content = message.get("content") if isinstance(message.get("content"), str) else None
            asked = _tool_calls(message.get("tool_calls"))
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

        def event(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            chunk = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": turn.model,
                "choices": choices,
                **extra,
            }
            return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"

        outcome: ChatOutcome = "ok"
        usage = Usage()
        try:
            yield event({"role": "assistant", "content": ""})
            stream, rounds, asked_whole = first, 0, False
            while True:
                streamed = StreamedRound()
                async for part in stream:
                    usage.add(part.get("usage"))
                    for content in streamed.take(part):
                        yield event({"content": content})
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
                    yield event({"content": "".join(held)})
                if kind == "client":
                    outcome = "client_tool_calls"
                    yield event({"tool_calls": [{"index": index, **call} for index, call in enumerate(calls)]})
                    yield event({}, "tool_calls")
                else:
                    yield event({}, "stop" if finish in (None, "tool_calls") else finish)
                break
            sources = [source.model_dump() for source in turn.book.sources]
            remembered = [source.model_dump() for source in turn.memory_sources]
            extra: dict[str, Any] = {"usage": usage.model_dump()} if turn.include_usage else {}
            yield event(None, rag_sources=sources, memory_sources=remembered, **extra)
            yield "data: [DONE]\n\n"
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
        return _one_chunk(await self._ask_whole(turn, rounds))

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

    async def knowledge_bases(self) -> list[str]:
        """The tenants chat offers: not per-file or memory tenants, within CHAT_KNOWLEDGE_BASES when set."""
        try:
            tenants = await self.store.tenant_names(_MAX_TENANTS, kinds=KNOWLEDGE_BASES)
        except CollectionMissingError:
            tenants = []
        allowed = self.settings.chat_knowledge_base_list
        return [name for name in tenants if allowed is None or name in allowed]

    async def models(self) -> ModelList:
        """The upstream's models (at least CHAT_DEFAULT_MODEL), then each with each knowledge base."""
        names = await self.upstream.list_models() or []
        if self.settings.chat_default_model not in names:
            names.append(self.settings.chat_default_model)
        cards = [ModelCard(id=name, owned_by="upstream") for name in names]
        for base in await self.knowledge_bases():
            cards.extend(ModelCard(id=f"{name}{KB_SEPARATOR}{base}", owned_by="rag") for name in names)
        return ModelList(data=cards)
