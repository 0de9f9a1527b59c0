"""The agentic loop, the OpenAI-compatible chat and the long-term memory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator

from shared_contract import ContractConfigError
from shared_contract.names import check_collection_name
from shared_contract.settings import SettingsGroup, check_http_url


class AgentSettings(SettingsGroup):
    """The agentic loop's limits (its model is AGENT_MODEL, shared with query generation)."""

    # Agentic mode (design section 5): a PydanticAI loop over the same retrieval steps. The model is
    # AGENT_MODEL at AGENT_API_BASE_URL (shared with query generation); the limits are enforced in code.
    enable_agentic_rag: bool = Field(
        default=False, description="Route /search to the agentic loop instead of the linear pipeline."
    )
    agent_max_iterations: int = Field(
        default=3, ge=1, le=10, description="Most retrieve rounds per request (enforced in code, not only asked)."
    )
    agent_timeout: float = Field(
        default=60.0,
        gt=0,
        le=600,
        description="Wall-clock seconds of one agent run; after it, what was retrieved is returned.",
    )
    agent_tool_preview_chars: int = Field(
        default=200, ge=20, le=4000, description="Characters of each result the model sees (the response has all)."
    )
    agent_preview_k: int = Field(default=5, ge=1, le=50, description="Results of a retrieve call the model sees.")
    agent_fetch_k: int = Field(
        default=20, ge=1, le=200, description="Candidates per query of a retrieve call, before rerank and k."
    )
    agent_strict_tools: bool = Field(default=True, description="Send the tools as strict JSON schemas.")
    agent_system_prompt: str = Field(
        default="",
        max_length=20_000,
        description="Replaces the built-in system prompt ($max_iterations is filled in); empty = built-in.",
    )
    agent_conversation_history_messages: int = Field(
        default=4, ge=1, le=50, description="Last chat messages the agent reads."
    )
    agent_include_raw_query: bool = Field(
        default=True, description="Seed the first retrieve round with the user's own question."
    )
    agent_document_max_chars: int = Field(
        default=20_000,
        ge=500,
        le=200_000,
        description="read_document: the whole document rebuilt from its chunks is cut at this many characters.",
    )


class ChatSettings(SettingsGroup):
    """POST /v1/chat/completions and GET /v1/models: the upstream model and the turn's retrieval."""

    # OpenAI-compatible chat (POST /v1/chat/completions, GET /v1/models): retrieval first, then the
    # upstream chat model through LiteLLM (any provider).
    chat_upstream_base_url: str | None = Field(
        default=None,
        description="The upstream's OpenAI-compatible base URL (e.g. http://ollama:11434/v1); unset = /v1 "
        "chat disabled (503).",
    )
    chat_upstream_api_key: SecretStr | None = Field(default=None, description="Bearer key sent to the upstream.")
    chat_default_model: str = Field(
        default="gpt-4o-mini",
        description="A model /v1/models always lists (added when the upstream's list lacks it), and the "
        "memory's model when MEMORY_MODEL is empty; a LiteLLM provider prefix (anthropic/...) goes to that "
        "provider, a bare name to CHAT_UPSTREAM_BASE_URL.",
    )
    chat_context_k: int = Field(default=5, ge=1, le=50, description="Passages injected as context per chat turn.")
    chat_rag_tools: bool = Field(
        default=True, description="Offer the model read_full_document and search (run by this service)."
    )
    chat_max_tool_rounds: int = Field(
        default=3, ge=0, le=10, description="Most tool rounds per chat turn; then one last call without tools."
    )
    chat_knowledge_bases: str = Field(
        default="",
        description="Comma-separated knowledge bases chat may search (and /v1/models lists); empty = any.",
    )
    chat_timeout: float = Field(default=120.0, gt=0, le=600, description="Seconds per upstream chat call, as a whole.")
    chat_max_upstream_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=64 * 1024,
        le=1024 * 1024 * 1024,
        description="Most bytes read of one upstream answer (a whole completion, a whole stream, the model "
        "list); past it the call fails with 502 upstream_response_too_large.",
    )
    # GET /v1/models: what a person can choose from.
    chat_models: str = Field(
        default="",
        description="Comma-separated chat models /v1/models lists (CHAT_DEFAULT_MODEL always among them); "
        "empty = the upstream's models less those it marks, or that are named, as embedding, rerank, speech "
        "or image models.",
    )
    chat_knowledge_base_models: str = Field(
        default="",
        description="Comma-separated models /v1/models also lists with each knowledge base (<model>@<kb>); "
        "empty = CHAT_DEFAULT_MODEL only; * = every listed model.",
    )
    chat_knowledge_base_names: str = Field(
        default="",
        description='JSON object of the names /v1/models shows for knowledge bases: {"<collection name>": '
        '"Handbook"}; a knowledge base without one is shown by its collection name.',
    )

    @property
    def chat_knowledge_base_list(self) -> frozenset[str] | None:
        """CHAT_KNOWLEDGE_BASES as a set; None when every knowledge base may be searched."""
        names = frozenset(part.strip() for part in self.chat_knowledge_bases.split(",") if part.strip())
        return names or None

    @property
    def chat_model_list(self) -> list[str]:
        """CHAT_MODELS in order, without repeats; empty when the upstream's list decides."""
        return _name_list(self.chat_models)

    @property
    def chat_knowledge_base_model_list(self) -> list[str] | None:
        """CHAT_KNOWLEDGE_BASE_MODELS in order; None for ``*`` (every listed model)."""
        names = _name_list(self.chat_knowledge_base_models)
        if "*" in names:
            return None
        return names or [self.chat_default_model]

    @property
    def chat_knowledge_base_name_map(self) -> dict[str, str]:
        """CHAT_KNOWLEDGE_BASE_NAMES as a mapping (checked at start-up)."""
        return _parse_knowledge_base_names(self.chat_knowledge_base_names)

    @field_validator("chat_knowledge_base_names")
    @classmethod
    def _knowledge_base_names(cls, value: str) -> str:
        try:
            _parse_knowledge_base_names(value)
        except ValueError as exc:
            raise ContractConfigError("CHAT_KNOWLEDGE_BASE_NAMES", str(exc)) from exc
        return value

    @field_validator("chat_knowledge_bases")
    @classmethod
    def _knowledge_bases(cls, value: str) -> str:
        for part in value.split(","):
            if part.strip():
                try:
                    check_collection_name(part.strip(), field="each name")
                except ValueError as exc:
                    raise ContractConfigError("CHAT_KNOWLEDGE_BASES", str(exc)) from exc
        return value

    @field_validator("chat_upstream_base_url")
    @classmethod
    def _chat_upstream_url(cls, value: str | None) -> str | None:
        return check_http_url(value)


_MAX_NAME_CHARS = 200


def _name_list(value: str) -> list[str]:
    return list(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))


def _parse_knowledge_base_names(value: str) -> dict[str, str]:
    """``{"<collection name>": "<name>"}`` from CHAT_KNOWLEDGE_BASE_NAMES; ValueError naming the rule broken."""
    if not value.strip():
        return {}
    try:
        names = json.loads(value)
    except ValueError:
        raise ValueError('must be a JSON object: {"<collection name>": "<name>", ...}') from None
    if not isinstance(names, dict):
        raise ValueError('must be a JSON object: {"<collection name>": "<name>", ...}')
    shown: dict[str, str] = {}
    for collection, name in names.items():
        check_collection_name(collection, field="each key")
        if not isinstance(name, str) or not name.strip() or not name.isprintable() or len(name) > _MAX_NAME_CHARS:
            raise ValueError(f"each name must be one line of printable text, 1 to {_MAX_NAME_CHARS} characters")
        shown[collection] = name.strip()
    return shown


class MemorySettings(SettingsGroup):
    """Facts remembered per user, and how they are recalled."""

    # Long-term memory: one Markdown file per fact under MEMORY_PATH/<user>/, every change a Git commit,
    # indexed under the tenant memory-<user>; reconciled on each chat turn by the chat model.
    enable_memory: bool = Field(
        default=False,
        description="Remember facts per user (chat's `user` field or MEMORY_USER_HEADER) and serve "
        "/api/v1/memory; needs the git binary.",
    )
    memory_path: Path = Field(
        default=Path(".data/memory"), description="One folder (and Git repository) per user of Markdown facts."
    )
    memory_model: str = Field(
        default="",
        description="Model that extracts and reconciles facts, at CHAT_UPSTREAM_BASE_URL; empty = CHAT_DEFAULT_MODEL.",
    )
    memory_user_header: str = Field(
        default="X-OpenWebUI-User-Id",
        description="Header naming the user when a chat request has no `user` field (Open WebUI forwards it "
        "with ENABLE_FORWARD_USER_INFO_HEADERS).",
    )
    memory_scope: Literal["user", "conversation"] = Field(
        default="user",
        description="user: every conversation shares the user's facts; conversation: only the facts learned "
        "in the same conversation (metadata.chat_id or X-OpenWebUI-Chat-Id) are recalled.",
    )
    memory_context_k: int = Field(default=5, ge=1, le=50, description="Facts injected per chat turn.")
    memory_max_operations: int = Field(
        default=5, ge=1, le=50, description="Most ADD/UPDATE/DELETE operations one turn may apply."
    )
    memory_candidates: int = Field(
        default=5, ge=1, le=20, description="Existing facts shown to the model next to each new candidate fact."
    )
    memory_min_relevance: float = Field(
        default=0.2, ge=0.0, le=1.0, description="Facts whose cosine to the turn is below this are not recalled."
    )
    memory_recency_half_life_days: float = Field(
        default=30.0, gt=0, description="Age (since the last update) at which a fact's recency boost halves."
    )
    memory_recency_weight: float = Field(
        default=0.3, ge=0.0, le=1.0, description="Share of a fact's score that recency decides (0 = relevance only)."
    )
    memory_mmr_lambda: float = Field(
        default=0.7, ge=0.0, le=1.0, description="MMR trade-off: 1 = relevance only, lower = more diverse facts."
    )
    memory_timeout: float = Field(
        default=60.0,
        gt=0,
        le=600,
        description="Seconds for one turn's reconciliation (both model calls); also the longest recall, the memory API "
        "and shutdown wait for reconciliations still running.",
    )
    memory_max_fact_chars_in_prompt: int = Field(
        default=4_000,
        ge=200,
        # memory.limits.MAX_PROMPT_FACT_CHARS: the fact files are read that far.
        le=16_000,
        description="Most characters of one fact that a chat prompt and recall results carry; a longer "
        "(hand-written) fact is cut after a sentence or word and marked ' […]', its file left as it is.",
    )

    @model_validator(mode="after")
    def _check_memory_path(self) -> Self:
        # Refused at start-up: else the service runs ready and every memory write fails.
        path = self.memory_path
        if self.enable_memory and path.exists():
            if not path.is_dir():
                raise ContractConfigError("MEMORY_PATH", f"{path} is not a directory")
            if not os.access(path, os.W_OK | os.X_OK):
                raise ContractConfigError("MEMORY_PATH", f"{path} is not writable")
        return self
