"""The PydanticAI models of the agent (query generation, the agentic loop) and of memory, built from
:class:`rag_runtime.llm.LLMEndpoint` (base URL, key, model name), as LiteLLM's calls are. Both talk to
an OpenAI-compatible endpoint; their timeout is the HTTP client's the caller passes (:func:`llm_timeout`)."""

from __future__ import annotations

import httpx
from pydantic_ai.models import Model
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from rag_runtime.llm import LLMEndpoint, Route
from retrieval_agent.settings import Settings

# PydanticAI's own "provider:model" spelling: the endpoint is always OpenAI-compatible, so the prefix
# is dropped. Other colons stay (Ollama tags such as "qwen2.5:3b"), as do LiteLLM's "openai/gpt-4o".
_PROVIDER_PREFIXES = ("openai:", "openai-chat:", "litellm:")
# The key the agent's endpoint is sent when AGENT_API_KEY is unset (keyless servers ignore it).
_AGENT_NO_KEY = "unused"


def model_name(configured: str) -> str:
    """AGENT_MODEL as the endpoint expects it: a bare name, or the name without a PydanticAI provider prefix."""
    name = configured.strip()
    for prefix in _PROVIDER_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix) :]
    return name


def openai_chat_model(endpoint: LLMEndpoint, http_client: httpx.AsyncClient | None = None) -> Model:
    """PydanticAI's chat model for ``endpoint`` (its base URL must be set). The API key goes into the
    provider's client only (never into a log line or an error message of ours)."""
    provider = OpenAIProvider(base_url=endpoint.base_url, api_key=endpoint.sent_key, http_client=http_client)
    return OpenAIChatModel(endpoint.model, provider=provider)


def llm_timeout(settings: Settings) -> httpx.Timeout:
    """The LLM client's per-request timeout: long enough for the slowest caller (an agent turn).

    Each caller bounds its own wall clock (QUERY_GENERATION_TIMEOUT, AGENT_TIMEOUT); connecting to a
    dead endpoint fails fast so the fallback is quick.
    """
    longest = max(settings.query_generation_timeout, settings.agent_timeout if settings.enable_agentic_rag else 0.0)
    return httpx.Timeout(longest, connect=min(5.0, longest))


def query_endpoint(settings: Settings) -> LLMEndpoint:
    """AGENT_MODEL at AGENT_API_BASE_URL with AGENT_API_KEY (the agent and query generation)."""
    return LLMEndpoint.of(
        model_name(settings.agent_model), settings.agent_api_base_url, settings.agent_api_key, no_key=_AGENT_NO_KEY
    )


def build_query_model(settings: Settings, http_client: httpx.AsyncClient | None = None) -> Model | None:
    """A chat model for AGENT_MODEL at AGENT_API_BASE_URL; None when no endpoint is configured.

    ``http_client``: the connection pool the model uses, owned (and closed) by the caller; without
    it pydantic-ai's process-wide shared client is used.
    """
    endpoint = query_endpoint(settings)
    if endpoint.base_url is None:
        return None
    return openai_chat_model(endpoint, http_client)


def build_memory_model(route: Route, http_client: httpx.AsyncClient) -> Model:
    """The model that extracts and reconciles memory facts: MEMORY_MODEL (or CHAT_DEFAULT_MODEL) as the
    chat upstream routes it (``ChatUpstream.route``); the caller checks that it routes to
    CHAT_UPSTREAM_BASE_URL at all."""
    if route.api_base is None:
        raise ValueError("the memory model needs CHAT_UPSTREAM_BASE_URL")
    endpoint = LLMEndpoint(model=route.served_name, base_url=route.api_base, api_key=route.api_key)
    return openai_chat_model(endpoint, http_client)
