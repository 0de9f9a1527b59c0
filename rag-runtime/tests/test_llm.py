"""LiteLLM as both services set it up, and how a model name is routed."""

from __future__ import annotations

import logging

import httpx
import pytest
from pydantic import SecretStr

from rag_runtime.llm import (
    NO_KEY,
    LLMEndpoint,
    Route,
    import_litellm,
    litellm_arguments,
    names_provider,
    provider_names,
    route,
    routed_to_provider,
)

PROVIDERS = frozenset({"openai", "anthropic", "ollama"})
BASE = "http://vllm:8000/v1"


def test_litellm_is_quiet_and_never_retries_on_its_own() -> None:
    litellm = import_litellm()

    assert litellm.telemetry is False
    assert litellm.turn_off_message_logging is True
    assert litellm.num_retries == 0
    assert litellm.disable_token_counter is True
    assert logging.getLogger("LiteLLM").handlers == []
    assert logging.getLogger("LiteLLM").propagate is True


def test_a_provider_prefix_routes_to_that_provider_and_openai_to_the_configured_endpoint() -> None:
    providers = provider_names(import_litellm())

    assert routed_to_provider("anthropic/claude-sonnet-4", providers)
    assert not routed_to_provider("openai/gpt-4o-mini", providers)
    assert names_provider("openai/gpt-4o-mini", providers)
    # A bare name, or an org/name that is no provider, goes to the configured base URL.
    assert not names_provider("gpt-4o-mini", providers)
    assert not names_provider("google-gemma/gemma-3", providers)


def test_an_endpoint_from_settings_takes_a_blank_base_url_or_key_as_none() -> None:
    timeout = httpx.Timeout(180.0, connect=5.0)

    assert LLMEndpoint.of("gemma", BASE, SecretStr("sk-1"), timeout=timeout, no_key="not-set") == LLMEndpoint(
        model="gemma", base_url=BASE, api_key="sk-1", timeout=timeout, no_key="not-set"
    )
    assert LLMEndpoint.of("gemma", "", SecretStr("")) == LLMEndpoint(
        model="gemma", base_url=None, api_key=None, timeout=None, no_key=NO_KEY
    )
    assert LLMEndpoint.of("gemma", None, None) == LLMEndpoint(model="gemma")


def test_an_endpoint_sends_its_key_or_its_placeholder() -> None:
    assert LLMEndpoint("m", api_key="sk-1", no_key="unused").sent_key == "sk-1"
    assert LLMEndpoint("m", no_key="unused").sent_key == "unused"
    assert LLMEndpoint("m").sent_key == NO_KEY


def test_with_model_keeps_the_endpoint() -> None:
    endpoint = LLMEndpoint("default", BASE, "sk-1", 30.0, "unused")

    assert endpoint.with_model("llama3.1:8b") == LLMEndpoint("llama3.1:8b", BASE, "sk-1", 30.0, "unused")


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        # A provider of LiteLLM's own: its own variables, never the configured base URL or key.
        (LLMEndpoint("anthropic/claude-sonnet-4", BASE, "sk-1"), Route("anthropic/claude-sonnet-4", None, None)),
        (LLMEndpoint("anthropic/claude-sonnet-4"), Route("anthropic/claude-sonnet-4", None, None)),
        # openai/: the configured endpoint, or the SDK's default without a base URL.
        (LLMEndpoint("openai/gpt-4o", BASE, "sk-1"), Route("openai/gpt-4o", BASE, "sk-1")),
        (LLMEndpoint("openai/gpt-4o", None, "sk-1"), Route("openai/gpt-4o", None, "sk-1")),
        (LLMEndpoint("openai/gpt-4o"), Route("openai/gpt-4o", None, NO_KEY)),
        # A bare name, or an org/name that is no provider, is openai/<name> at the base URL.
        (LLMEndpoint("llama3.1:8b", BASE), Route("openai/llama3.1:8b", BASE, NO_KEY)),
        (LLMEndpoint("google/gemma-3", BASE, no_key="not-set"), Route("openai/google/gemma-3", BASE, "not-set")),
        (LLMEndpoint("llama3.1:8b"), Route("openai/llama3.1:8b", None, NO_KEY)),
    ],
)
def test_route(endpoint: LLMEndpoint, expected: Route) -> None:
    assert route(endpoint, PROVIDERS) == expected


def test_a_route_knows_its_path_and_served_name() -> None:
    openai_route = route(LLMEndpoint("openai/gpt-4o", BASE), PROVIDERS)
    provider_route = route(LLMEndpoint("anthropic/claude-sonnet-4"), PROVIDERS)

    assert (openai_route.openai_compatible, openai_route.served_name) == (True, "gpt-4o")
    assert (provider_route.openai_compatible, provider_route.served_name) == (False, "anthropic/claude-sonnet-4")


def test_litellm_arguments_name_the_endpoint_and_key_only_where_the_route_has_them() -> None:
    timeout = httpx.Timeout(180.0, connect=5.0)

    assert litellm_arguments(Route("openai/gemma", BASE, "sk-1"), timeout) == {
        "model": "openai/gemma",
        "timeout": timeout,
        "num_retries": 0,
        "api_base": BASE,
        "api_key": "sk-1",
    }
    assert litellm_arguments(Route("openai/gpt-4o", None, NO_KEY), 120.0) == {
        "model": "openai/gpt-4o",
        "timeout": 120.0,
        "num_retries": 0,
        "api_key": NO_KEY,
    }
    assert litellm_arguments(Route("anthropic/claude-sonnet-4", None, None), None) == {
        "model": "anthropic/claude-sonnet-4",
        "timeout": None,
        "num_retries": 0,
    }


def test_the_routing_agrees_with_litellm_s_provider_list() -> None:
    providers = provider_names(import_litellm())

    assert route(LLMEndpoint("anthropic/claude-sonnet-4", BASE, "sk-1"), providers) == Route(
        "anthropic/claude-sonnet-4", None, None
    )
    assert route(LLMEndpoint("google-gemma/gemma-3", BASE, "sk-1"), providers) == Route(
        "openai/google-gemma/gemma-3", BASE, "sk-1"
    )
