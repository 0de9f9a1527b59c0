"""LiteLLM as both services set it up, and how a model name is routed."""

from __future__ import annotations

import logging

from rag_runtime.llm import import_litellm, names_provider, provider_names, routed_to_provider


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
