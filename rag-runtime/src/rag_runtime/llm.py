"""The one LLM client set-up of both services: an endpoint value, LiteLLM's routing of a model name,
and LiteLLM itself configured once (the vision engines' page reads and the chat upstream). The
retrieval agent's PydanticAI models are built from the same endpoint value
(``retrieval_agent.adapters.llm``).

A server must not reach the network at import, report telemetry, print banners, retry on its own
or hand users' content (chats, passages, page images) to logging callbacks.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

import httpx
from pydantic import SecretStr

# The provider prefix of an OpenAI-compatible endpoint (``openai/<model>`` with an api_base).
OPENAI_PROVIDER = "openai"
# The OpenAI client refuses an empty key; keyless endpoints (Ollama, vLLM) ignore this one.
NO_KEY = "no-key"
_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


def import_litellm() -> Any:
    """LiteLLM, configured for a server: no network at import, no telemetry, no third-party logging."""
    # The bundled cost map instead of fetching one from GitHub at import time.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    # No "Give Feedback / Get Help" banners on stdout for every failed call.
    litellm.suppress_debug_info = True
    # Chats, passages and page images are users' content: never hand them to logging callbacks.
    litellm.turn_off_message_logging = True
    # A failed call is answered at once with the upstream's status; the caller decides about retrying.
    litellm.num_retries = 0
    # Usage is what the upstream reports. LiteLLM would count a stream's tokens itself (tiktoken over the
    # whole answer, synchronously in the event loop: seconds for a long answer) when it reports none.
    litellm.disable_token_counter = True
    _log_through_root()
    return litellm


def _log_through_root() -> None:
    """LiteLLM's log lines through the service's handler (its format, one line each) instead of the raw
    stderr handler LiteLLM adds, whose secret filter moves to the logger."""
    for name in _LITELLM_LOGGERS:
        own = logging.getLogger(name)
        for handler in list(own.handlers):
            own.removeHandler(handler)
            for log_filter in handler.filters:
                if log_filter not in own.filters:
                    own.addFilter(log_filter)
        own.propagate = True


def provider_names(litellm: Any) -> frozenset[str]:
    """The provider prefixes LiteLLM routes to a provider of its own."""
    return frozenset(str(getattr(provider, "value", provider)) for provider in litellm.provider_list)


def names_provider(model: str, providers: Collection[str]) -> bool:
    """Whether ``model`` starts with a LiteLLM provider prefix (``anthropic/...``, ``openai/...``)."""
    prefix, slash, _ = model.partition("/")
    return bool(slash) and prefix in providers


def routed_to_provider(model: str, providers: Collection[str]) -> bool:
    """Whether ``model`` names a LiteLLM provider other than the OpenAI-compatible path, so it goes
    to that provider instead of a configured base URL."""
    return names_provider(model, providers) and not model.startswith(f"{OPENAI_PROVIDER}/")


@dataclass(frozen=True, slots=True)
class LLMEndpoint:
    """One configured LLM: the model name, the OpenAI-compatible base URL (None: none configured),
    the API key (None: none configured), the per-request timeout, and the key sent when none is
    configured (each caller keeps the placeholder it always sent)."""

    model: str
    base_url: str | None = None
    api_key: str | None = None
    timeout: float | httpx.Timeout | None = None
    no_key: str = NO_KEY

    @classmethod
    def of(
        cls,
        model: str,
        base_url: str | None,
        api_key: SecretStr | None,
        *,
        timeout: float | httpx.Timeout | None = None,
        no_key: str = NO_KEY,
    ) -> LLMEndpoint:
        """From settings' values: a blank base URL or key is none."""
        key = api_key.get_secret_value() if api_key is not None else None
        return cls(model=model, base_url=base_url or None, api_key=key or None, timeout=timeout, no_key=no_key)

    @property
    def sent_key(self) -> str:
        """The key an OpenAI client is given: the configured one, else :attr:`no_key` (an explicit
        value also keeps the SDK from reading OPENAI_API_KEY for this endpoint)."""
        return self.api_key or self.no_key

    def with_model(self, model: str) -> LLMEndpoint:
        """The same endpoint for another model name (a chat request names its own)."""
        return replace(self, model=model)


@dataclass(frozen=True, slots=True)
class Route:
    """Where LiteLLM sends one model name: its model string, and the endpoint and key of the
    OpenAI-compatible path (both None for a provider of LiteLLM's own, configured by its variables)."""

    model: str
    api_base: str | None
    api_key: str | None

    @property
    def openai_compatible(self) -> bool:
        """Whether the name goes to the OpenAI-compatible path (``openai/<name>``), not to a provider
        of LiteLLM's own."""
        return self.model.startswith(f"{OPENAI_PROVIDER}/")

    @property
    def served_name(self) -> str:
        """The name as the OpenAI-compatible endpoint knows it (without LiteLLM's ``openai/``)."""
        return self.model.removeprefix(f"{OPENAI_PROVIDER}/")


def route(endpoint: LLMEndpoint, providers: Collection[str]) -> Route:
    """A name with a LiteLLM provider prefix (``anthropic/...``) goes to that provider; any other is
    ``openai/<name>`` at the endpoint's base URL (None: the SDK's default), with its key (or its
    placeholder, :attr:`LLMEndpoint.sent_key`)."""
    if routed_to_provider(endpoint.model, providers):
        return Route(model=endpoint.model, api_base=None, api_key=None)
    bare = endpoint.model.removeprefix(f"{OPENAI_PROVIDER}/")
    return Route(model=f"{OPENAI_PROVIDER}/{bare}", api_base=endpoint.base_url, api_key=endpoint.sent_key)


def litellm_arguments(route: Route, timeout: float | httpx.Timeout | None) -> dict[str, Any]:
    """The arguments every LiteLLM call of a route takes: the model, where and with which key, the
    timeout, and no retries of LiteLLM's own (the caller decides about retrying)."""
    arguments: dict[str, Any] = {"model": route.model, "timeout": timeout, "num_retries": 0}
    if route.api_base is not None:
        arguments["api_base"] = route.api_base
    if route.api_key is not None:
        arguments["api_key"] = route.api_key
    return arguments
