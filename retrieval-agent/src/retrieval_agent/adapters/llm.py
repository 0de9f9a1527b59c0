"""The LLM behind query generation: an OpenAI-compatible endpoint (e.g. a LiteLLM proxy)."""

from __future__ import annotations

import httpx
from pydantic_ai.models import Model
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from retrieval_agent.settings import Settings


def build_query_model(settings: Settings, http_client: httpx.AsyncClient | None = None) -> Model | None:
    """A chat model for AGENT_MODEL at AGENT_API_BASE_URL; None when no endpoint is configured.

    ``http_client``: the connection pool the model uses, owned (and closed) by the caller; without
    it pydantic-ai's process-wide shared client is used.
    """
    if settings.agent_api_base_url is None:
        return None
    api_key = settings.agent_api_key.get_secret_value() if settings.agent_api_key else "unused"
    provider = OpenAIProvider(base_url=settings.agent_api_base_url, api_key=api_key, http_client=http_client)
    return OpenAIChatModel(settings.agent_model, provider=provider)
