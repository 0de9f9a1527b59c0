"""GET /v1/models: the models a person can choose from, and how a model id names knowledge bases.

Chat models: CHAT_MODELS when set, as listed. Else the upstream's list less what is not a chat model:
a model the upstream marks (an entry's ``type``, ``mode``, ``task`` or ``capabilities``; LiteLLM's
``/model/info`` mode) as a chat model is kept, one it marks as an embedding, rerank, speech, image,
moderation or OCR model is dropped; any other is dropped when its name is such a model's
(:data:`NOT_CHAT_NAME`). CHAT_DEFAULT_MODEL is always listed.

Then the knowledge bases (the store's tenants less per-file and memory ones, within CHAT_KNOWLEDGE_BASES):
each once per model of CHAT_KNOWLEDGE_BASE_MODELS (CHAT_DEFAULT_MODEL alone unless set), as
``<model>@<kb>``, the id a request names. The card's ``name`` (what Open WebUI shows) is
CHAT_KNOWLEDGE_BASE_NAMES' name for the knowledge base, else its collection name, then the model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rag_runtime.store import KNOWLEDGE_BASES
from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.chat.models import ModelCard, ModelList
from retrieval_agent.chat.upstream import ChatUpstream, UpstreamModel
from retrieval_agent.settings import Settings
from shared_contract import CollectionMissingError

KB_SEPARATOR = "@"
KB_JOINER = "+"
# The largest tenants offered; more knowledge bases than this is no list to choose from.
_MAX_TENANTS = 10_000

# Names of models that are no chat models, for an upstream that does not say (Ollama, vLLM, OpenAI):
# embedding (text-embedding-3-small, nomic-embed-text, all-minilm, bge-m3, multilingual-e5-large,
# gte-large), rerank, speech (whisper-1, tts-1, gpt-4o-transcribe), image (dall-e-3, gpt-image-1),
# moderation, and OpenAI's completion-only babbage and davinci.
NOT_CHAT_NAME = re.compile(
    r"embed|rerank|minilm|mpnet|sentence-transformers|colbert|splade|whisper|transcribe|dall-e|gpt-image"
    r"|moderation|babbage|davinci|(?:^|[/:_.-])(?:bge|e5|gte|tts|bm25|bm42)(?:[/:_.-]|$)",
    re.IGNORECASE,
)
# What upstreams call a chat model (LiteLLM's mode, Together's and LM Studio's type, Mistral's and
# Ollama's capabilities), and what they call the others.
_CHAT_KINDS = frozenset({"chat", "completion", "completion_chat", "llm", "vlm", "language", "code", "responses"})
_NOT_CHAT_KIND = re.compile(r"embed|rerank|image|audio|speech|transcri|tts|moderation|video|ocr|classif")


def split_model(model: str) -> tuple[str, list[str]]:
    """``gpt-4o-mini@kb1+kb2`` -> (``gpt-4o-mini``, [kb1, kb2]); a name without ``@`` names no knowledge base."""
    name, separator, suffix = model.rpartition(KB_SEPARATOR)
    if not separator:
        return model, []
    return name, suffix.split(KB_JOINER)


def is_chat_model(model: UpstreamModel) -> bool:
    """Whether a person may chat with ``model``: as the upstream marks it, else by its name. A mark that
    is neither (Anthropic's ``"type": "model"``) says nothing."""
    if model.kinds & _CHAT_KINDS:
        return True
    if any(_NOT_CHAT_KIND.search(kind) for kind in model.kinds):
        return False
    return NOT_CHAT_NAME.search(model.id) is None


def chat_models(settings: Settings, upstream_models: Iterable[UpstreamModel] | None) -> list[str]:
    """The chat models listed (the module docstring's rule), CHAT_DEFAULT_MODEL among them."""
    configured = settings.chat_model_list
    names = configured or [model.id for model in upstream_models or [] if is_chat_model(model)]
    names = list(dict.fromkeys(names))
    if settings.chat_default_model not in names:
        names.append(settings.chat_default_model)
    return names


async def knowledge_bases(settings: Settings, store: StoreSearch) -> list[str]:
    """The tenants chat offers: not per-file or memory tenants, within CHAT_KNOWLEDGE_BASES when set."""
    try:
        tenants = await store.tenant_names(_MAX_TENANTS, kinds=KNOWLEDGE_BASES)
    except CollectionMissingError:
        tenants = []
    allowed = settings.chat_knowledge_base_list
    return [name for name in tenants if allowed is None or name in allowed]


async def list_models(settings: Settings, upstream: ChatUpstream, store: StoreSearch) -> ModelList:
    """GET /v1/models: the chat models, then each knowledge base with CHAT_KNOWLEDGE_BASE_MODELS' models."""
    # CHAT_MODELS decides alone: the upstream is not asked.
    names = chat_models(settings, None if settings.chat_model_list else await upstream.list_models())
    cards = [ModelCard(id=name, name=name, owned_by="upstream") for name in names]
    with_bases = settings.chat_knowledge_base_model_list or names
    shown = settings.chat_knowledge_base_name_map
    for base in await knowledge_bases(settings, store):
        label = shown.get(base, base)
        cards.extend(
            ModelCard(id=f"{name}{KB_SEPARATOR}{base}", name=f"{label} ({name})", owned_by="rag") for name in with_bases
        )
    return ModelList(data=cards)
