"""The upstream chat model, through the LiteLLM SDK: the only code that calls it, and the one place its
failures become :class:`ChatError` (OpenAI-shaped, with the upstream's status).

Routing: a model named with a LiteLLM provider prefix (``anthropic/...``, ``ollama/...``) goes to that
provider as LiteLLM configures it (its own key variables); any other name is sent to
CHAT_UPSTREAM_BASE_URL as an OpenAI-compatible endpoint (``openai/<name>`` with ``api_base``), with
CHAT_UPSTREAM_API_KEY.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import anyio
import httpx

from rag_runtime.llm import (
    OPENAI_PROVIDER,
    LLMEndpoint,
    Route,
    import_litellm,
    litellm_arguments,
    provider_names,
    route,
)
from retrieval_agent.chat.bounded_http import bounded_client
from retrieval_agent.chat.errors import (
    UPSTREAM_ERROR,
    UPSTREAM_TIMEOUT,
    UPSTREAM_UNAVAILABLE,
    ChatError,
    invalid_request,
)
from retrieval_agent.settings import Settings
from shared_contract.redact import REDACTED, redact_secrets

logger = logging.getLogger(__name__)

_MODELS_TIMEOUT = httpx.Timeout(5.0)
# The OpenAI SDK's own pool size (LiteLLM's client for an endpoint has the same).
_UPSTREAM_LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
# Where a model-list entry says what a model is (Together's and LM Studio's type, LiteLLM's mode, ...).
_KIND_FIELDS = ("type", "mode", "task")
_MAX_MESSAGE_CHARS = 500
# The loggers LiteLLM gives a stderr handler of its own at import.
# The upstream's answer headers a client needs to retry well; passed on with its error.
_RETRY_HEADERS = ("retry-after", "retry-after-ms")
_RETRY_HEADER_PREFIX = "x-ratelimit-reset-"
_MAX_HEADER_CHARS = 64
_MIN_MASKED_KEY_CHARS = 8


@dataclass(frozen=True, slots=True)
class UpstreamModel:
    """One model of the upstream's list, and what the upstream says it is (``kinds``, lower case: an entry's
    ``type``/``mode``/``task``, its true ``capabilities``, LiteLLM's ``model_info.mode``; empty when it says
    nothing)."""

    id: str
    kinds: frozenset[str] = frozenset()


class ChatUpstream:
    """Chat completions (whole or streamed) and the model list of the upstream.

    Built in the app's lifespan (importing LiteLLM takes a second); closed with the app.
    """

    def __init__(self, settings: Settings, litellm: Any | None = None) -> None:
        self._litellm = litellm if litellm is not None else import_litellm()
        # LiteLLM's exceptions subclass the OpenAI SDK's (its dependency), whose classes name the transport faults.
        import openai

        self._openai: Any = openai
        self._providers = provider_names(self._litellm)
        # Each request names its model; the endpoint, key and timeout are CHAT_UPSTREAM_*'s.
        self._endpoint = LLMEndpoint.of(
            settings.chat_default_model,
            settings.chat_upstream_base_url,
            settings.chat_upstream_api_key,
            timeout=settings.chat_timeout,
        )
        self._timeout = settings.chat_timeout
        limit = settings.chat_max_upstream_bytes
        self._http = bounded_client(limit, timeout=_MODELS_TIMEOUT)
        # LiteLLM's calls to CHAT_UPSTREAM_BASE_URL go through this client, so that each answer is read
        # within CHAT_MAX_UPSTREAM_BYTES (a provider of LiteLLM's own is read by LiteLLM's client).
        self._client: Any = None
        if self._endpoint.base_url is not None:
            self._client = openai.AsyncOpenAI(
                api_key=self._endpoint.sent_key,
                base_url=self._endpoint.base_url,
                max_retries=0,
                timeout=self._timeout,
                # The SDK takes an httpx client (as LiteLLM gives it) as well as its own httpx2 one.
                http_client=cast(
                    Any, bounded_client(limit, timeout=self._timeout, limits=_UPSTREAM_LIMITS, follow_redirects=True)
                ),
            )

    async def aclose(self) -> None:
        """Close the HTTP clients (LiteLLM keeps its own pools for providers of its own)."""
        await self._http.aclose()
        if self._client is not None:
            await self._client.close()

    def route(self, model: str) -> Route:
        """LiteLLM's routing of ``model`` (module docstring)."""
        return route(self._endpoint.with_model(model), self._providers)

    def _arguments(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        tool_choice: Any,
        params: Mapping[str, Any],
    ) -> dict[str, Any]:
        target = self.route(model)
        arguments: dict[str, Any] = {**params, **litellm_arguments(target, self._timeout), "messages": list(messages)}
        if target.api_base is not None:
            arguments["client"] = self._client
            # LiteLLM filters parameters by its OpenAI model catalogue (a bare ``llama3.1:8b`` loses
            # ``user`` and is refused ``reasoning_effort``); this endpoint is the judge of what it
            # takes, so what LiteLLM does not list for the name goes as a top-level field anyway.
            unlisted = self._unlisted(target.model, params)
            if unlisted:
                arguments["allowed_openai_params"] = unlisted
        if tools:
            arguments["tools"] = list(tools)
            if tool_choice is not None:
                arguments["tool_choice"] = tool_choice
        return arguments

    def _unlisted(self, model: str, params: Mapping[str, Any]) -> list[str]:
        """The parameters in ``params`` that LiteLLM does not list as supported for ``model``."""
        _, _, name = model.partition("/")
        supported = self._litellm.get_supported_openai_params(model=name, custom_llm_provider=OPENAI_PROVIDER)
        return [key for key in params if key not in (supported or [])]

    async def complete(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One whole completion, as OpenAI's JSON (a dict), within CHAT_TIMEOUT. Raises ChatError."""
        arguments = self._arguments(model, messages, tools, tool_choice, params or {})
        response = await self._send(arguments, anyio.current_time() + self._timeout)
        answer: dict[str, Any] = response.model_dump()
        if not answer.get("choices"):
            raise unreadable_answer("no choice")
        return answer

    async def stream(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """A streamed completion's chunks (dicts). The request is sent here, so an HTTP error is raised
        (as ChatError) before the first chunk is asked for; a failure mid-stream raises from the iterator,
        as does a stream going on past CHAT_TIMEOUT. A chunk's ``finish_reason`` is the upstream's own:
        a stream that ended without one has none."""
        arguments = self._arguments(model, messages, tools, tool_choice, params or {})
        arguments["stream"] = True
        # LiteLLM's timeout bounds each read, so an upstream that keeps sending never times out:
        # CHAT_TIMEOUT bounds the whole call, from the request to the last chunk.
        deadline = anyio.current_time() + self._timeout
        response = await self._send(arguments, deadline)
        return self._chunks(response, deadline)

    async def _send(self, arguments: dict[str, Any], deadline: float) -> Any:
        """LiteLLM's call, given up at ``deadline``: its timeout bounds each read, so an upstream sending
        a byte at a time would hold a whole answer (or a stream's headers) for ever."""
        with anyio.CancelScope(deadline=deadline):
            try:
                return await self._litellm.acompletion(**arguments)
            except Exception as exc:
                raise self.error(exc) from exc
        # Only reached when the deadline cancelled the call.
        raise upstream_timeout(f"no answer within CHAT_TIMEOUT ({self._timeout:g} s)")

    async def _chunks(self, response: Any, deadline: float) -> AsyncIterator[dict[str, Any]]:
        try:
            while True:
                # The scope covers the read only, never a yield (a cancel scope must not span one).
                with anyio.CancelScope(deadline=deadline) as scope:
                    chunk = await anext(response, None)
                if scope.cancelled_caught:
                    raise upstream_timeout(f"the stream went on past CHAT_TIMEOUT ({self._timeout:g} s)")
                if chunk is None:
                    return
                data: dict[str, Any] = chunk.model_dump()
                if not upstream_sent_finish(response):
                    # LiteLLM ends a stream that closed without a finish_reason with an invented "stop":
                    # keep it unfinished, so that an answer cut off is not passed on as whole.
                    for choice in data.get("choices") or []:
                        choice["finish_reason"] = None
                yield data
        except ChatError:
            raise
        except Exception as exc:
            raise self.error(exc) from exc
        finally:
            # Release the upstream connection now, also when the stream is left early.
            await response.aclose()

    async def list_models(self) -> list[UpstreamModel] | None:
        """The models GET {CHAT_UPSTREAM_BASE_URL}/models lists, with what the upstream says they are
        (there, and in LiteLLM's GET /model/info where the upstream is a LiteLLM proxy); None when it is
        down or has no list."""
        if self._endpoint.base_url is None:
            return None
        listed: list[Any] | None = None
        modes: dict[str, str] = {}

        async def fetch_list() -> None:
            nonlocal listed
            listed = await self._data("models")

        async def fetch_modes() -> None:
            modes.update(_litellm_modes(await self._data("model/info")))

        async with anyio.create_task_group() as group:
            group.start_soon(fetch_list)
            group.start_soon(fetch_modes)
        if listed is None:
            logger.info("the upstream's model list is unavailable: listing CHAT_DEFAULT_MODEL")
            return None
        models: list[UpstreamModel] = []
        for entry in listed:
            if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                kinds = _declared_kinds(entry)
                mode = modes.get(entry["id"])
                models.append(UpstreamModel(entry["id"], kinds | {mode} if mode else kinds))
        return models

    async def _data(self, path: str) -> list[Any] | None:
        """The ``data`` list of GET {CHAT_UPSTREAM_BASE_URL}/``path``; None when there is none."""
        headers = {"Authorization": f"Bearer {self._endpoint.api_key}"} if self._endpoint.api_key else {}
        try:
            response = await self._http.get(f"{self._endpoint.base_url}/{path}", headers=headers)
            response.raise_for_status()
            data = response.json().get("data")
        except (httpx.HTTPError, ValueError, AttributeError, ChatError) as exc:
            logger.debug("GET %s of the upstream failed (%s)", path, type(exc).__name__)
            return None
        return data if isinstance(data, list) else None

    def error(self, exc: BaseException) -> ChatError:
        """LiteLLM's exception as the /v1 error: the upstream's status (with its Retry-After and
        x-ratelimit-reset-* headers), 502 when it is unreachable, 504 on its timeout. Its text is
        shortened and its secrets masked."""
        # Ours, raised inside LiteLLM's call (an answer past CHAT_MAX_UPSTREAM_BYTES) and wrapped by it.
        ours = next((cause for cause in _chain(exc) if isinstance(cause, ChatError)), None)
        if ours is not None:
            return ours
        detail = self._short(str(getattr(exc, "message", None) or exc))
        # Raised by LiteLLM before any request is sent: the upstream never answered.
        if isinstance(exc, self._litellm.UnsupportedParamsError):
            return invalid_request(
                f"The model's provider does not take these parameters (refused by LiteLLM; nothing was sent "
                f"upstream): {detail}"
            )
        # LiteLLM reports a refused connection as its InternalServerError (500): the cause chain tells.
        causes = list(_chain(exc))
        if any(isinstance(cause, self._openai.APITimeoutError) for cause in causes):
            return upstream_timeout(detail)
        status = getattr(exc, "status_code", None)
        unreachable = any(isinstance(cause, self._openai.APIConnectionError | ConnectionError) for cause in causes)
        if unreachable or not isinstance(status, int) or not 400 <= status < 600:
            return ChatError(
                502, f"The upstream model is unreachable: {detail}", code=UPSTREAM_UNAVAILABLE, outcome="upstream_error"
            )
        # LiteLLM's own exception (first) subclasses the SDK's status errors; an HTTP answer shows below it.
        answered_status = any(
            isinstance(cause, self._openai.APIStatusError | httpx.HTTPStatusError) for cause in causes[1:]
        )
        if status == 500 and not answered_status:
            # LiteLLM reports a 2xx answer it could not read (not JSON, no choices) as its own HTTP 500.
            innermost = causes[-1]
            return unreadable_answer(self._short(str(innermost), limit=200) or type(innermost).__name__)
        return ChatError(
            status,
            f"The upstream model answered HTTP {status}: {detail}",
            code=UPSTREAM_ERROR,
            outcome="upstream_error",
            headers=_retry_headers(causes),
        )

    def _short(self, text: str, limit: int = _MAX_MESSAGE_CHARS) -> str:
        """An upstream's error text as a message: short, and without the secrets upstreams echo (a key
        sent, a URL's credentials), this service's own key included whatever its form."""
        # A key too short to be a secret would mask every word it occurs in.
        if self._endpoint.api_key and len(self._endpoint.api_key) >= _MIN_MASKED_KEY_CHARS:
            text = text.replace(self._endpoint.api_key, REDACTED)
        return _short(redact_secrets(text), limit)


def _declared_kinds(entry: Mapping[str, Any]) -> frozenset[str]:
    """What a model-list entry says the model is: its kind fields and its true capabilities."""
    kinds = {entry[key].lower() for key in _KIND_FIELDS if isinstance(entry.get(key), str)}
    capabilities = entry.get("capabilities")
    if isinstance(capabilities, dict):
        # Mistral's {"completion_chat": true, ...}
        kinds.update(str(key).lower() for key, value in capabilities.items() if value is True)
    elif isinstance(capabilities, list):
        # Ollama's ["completion", "tools"] or ["embedding"]
        kinds.update(item.lower() for item in capabilities if isinstance(item, str))
    return frozenset(kinds)


def _litellm_modes(data: list[Any] | None) -> dict[str, str]:
    """LiteLLM's GET /model/info entries as {model name: mode} (``chat``, ``embedding``, ``rerank``, ...)."""
    modes: dict[str, str] = {}
    for entry in data or []:
        if not isinstance(entry, dict):
            continue
        info = entry.get("model_info")
        mode = info.get("mode") if isinstance(info, dict) else None
        if isinstance(entry.get("model_name"), str) and isinstance(mode, str) and mode:
            modes[entry["model_name"]] = mode.lower()
    return modes


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _retry_headers(causes: Sequence[BaseException]) -> dict[str, str]:
    """The upstream's ``Retry-After`` and ``x-ratelimit-reset-*`` headers, from the first exception in
    the chain that carries them (LiteLLM's copy of the answer's headers, or the SDK's response)."""
    for cause in causes:
        for headers in (getattr(cause, "litellm_response_headers", None), _response_headers(cause)):
            kept = {
                name.lower(): value
                for name, value in (headers.items() if isinstance(headers, Mapping) else ())
                if isinstance(name, str) and _is_retry_header(name.lower()) and _plain_value(value)
            }
            if kept:
                return kept
    return {}


def _response_headers(cause: BaseException) -> object:
    return getattr(getattr(cause, "response", None), "headers", None)


def _is_retry_header(name: str) -> bool:
    return name in _RETRY_HEADERS or name.startswith(_RETRY_HEADER_PREFIX)


def _plain_value(value: object) -> bool:
    # Passed on as it came only when it is a short line of printable ASCII.
    return isinstance(value, str) and len(value) <= _MAX_HEADER_CHARS and value.isascii() and value.isprintable()


def unreadable_answer(why: str) -> ChatError:
    """The upstream answered 2xx, but not with a chat completion we can read: a bad gateway."""
    return ChatError(
        502,
        f"The upstream model's answer could not be read as a chat completion ({why}).",
        code=UPSTREAM_ERROR,
        outcome="upstream_error",
    )


def upstream_sent_finish(stream: Any) -> bool:
    """Whether the upstream itself sent a finish_reason on LiteLLM's stream so far.

    LiteLLM has no public way to tell its own "stop" from the upstream's: its stream wrapper
    (``CustomStreamWrapper``, litellm 1.83) records the upstream's in ``received_finish_reason`` or
    ``intermittent_finish_reason``. Read only here; a LiteLLM without them fails every stream with
    an AttributeError (typed as an upstream error), which the chat tests catch.
    """
    return bool(stream.received_finish_reason or stream.intermittent_finish_reason)


def upstream_timeout(detail: str) -> ChatError:
    """No (whole) answer within CHAT_TIMEOUT."""
    return ChatError(
        504,
        f"The upstream model did not answer in time: {detail}",
        code=UPSTREAM_TIMEOUT,
        outcome="upstream_error",
    )


def unfinished_stream() -> ChatError:
    """A stream that carried an answer but ended without a finish_reason: the answer may be cut off."""
    return ChatError(
        502,
        "The upstream model's answer was cut off: the upstream stream ended without a finish_reason.",
        code=UPSTREAM_ERROR,
        outcome="upstream_error",
    )


def _short(text: str, limit: int = _MAX_MESSAGE_CHARS) -> str:
    # LiteLLM puts a Python traceback (with server paths) into some messages: never pass it on.
    text = text.split("Traceback (most recent call last)", 1)[0]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
