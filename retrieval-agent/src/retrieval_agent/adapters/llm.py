"""The LLM behind query generation and the agentic loop: an OpenAI-compatible endpoint (e.g. a LiteLLM proxy)."""

from __future__ import annotations

import httpx
from pydantic_ai.models import Model
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from retrieval_agent.settings import Settings

# PydanticAI's own "provider:model" spelling: the endpoint is always OpenAI-compatible, so the prefix
# is dropped. Other colons stay (Ollama tags such as "qwen2.5:3b"), as do LiteLLM's "openai/gpt-4o".
_PROVIDER_PREFIXES = ("openai:", "openai-chat:", "litellm:")


def model_name(configured: str) -> str:
    """AGENT_MODEL as the endpoint expects it: a bare name, or the name without a PydanticAI provider prefix."""
    name = configured.strip()
    for prefix in _PROVIDER_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix) :]
    return name


def build_query_model(settings: Settings, http_client: httpx.AsyncClient | None = None) -> Model | None:
    """A chat model for AGENT_MODEL at AGENT_API_BASE_URL; None when no endpoint is configured.

    ``http_client``: the connection pool the model uses, owned (and closed) by the caller; without
    it pydantic-ai's process-wide shared client is used. The API key goes into the provider's
    client only (never into a log line or an error message of ours).
    """
    if settings.agent_api_base_url is None:
        return None
    api_key = settings.agent_api_key.get_secret_value() if settings.agent_api_key else "unused"
    provider = OpenAIProvider(base_url=settings.agent_api_base_url, api_key=api_key, http_client=http_client)
    return OpenAIChatModel(model_name(settings.agent_model), provider=provider)


def llm_timeout(settings: Settings) -> httpx.Timeout:
    """The LLM client's per-request timeout: long enough for the slowest caller (an agent turn).

    Each caller bounds its own wall clock (QUERY_GENERATION_TIMEOUT, AGENT_TIMEOUT); connecting to a
    dead endpoint fails fast so the fallback is quick.
    """
    longest = max(settings.query_generation_timeout, settings.agent_timeout if settings.enable_agentic_rag else 0.0)
    return httpx.Timeout(longest, connect=min(5.0, longest))


def build_memory_model(settings: Settings, route_model: str, http_client: httpx.AsyncClient) -> Model:
    """The model that extracts and reconciles memory facts: MEMORY_MODEL (or CHAT_DEFAULT_MODEL) at the chat
    upstream's OpenAI-compatible endpoint. ``route_model``: the name as LiteLLM's routing sends it there
    (``openai/<name>``); the caller checks that the name routes to CHAT_UPSTREAM_BASE_URL at all."""
    if settings.chat_upstream_base_url is None:
        raise ValueError("the memory model needs CHAT_UPSTREAM_BASE_URL")
    key = settings.chat_upstream_api_key
    api_key = key.get_secret_value() if key is not None else "no-key"
    provider = OpenAIProvider(base_url=settings.chat_upstream_base_url, api_key=api_key, http_client=http_client)
    return OpenAIChatModel(route_model.removeprefix("openai/"), provider=provider)
