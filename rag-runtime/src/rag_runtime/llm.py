"""LiteLLM, set up once for both services: the vision engines' page reads and the chat upstream.

A server must not reach the network at import, report telemetry, print banners, retry on its own
or hand users' content (chats, passages, page images) to logging callbacks.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from typing import Any

# The provider prefix of an OpenAI-compatible endpoint (``openai/<model>`` with an api_base).
OPENAI_PROVIDER = "openai"
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
