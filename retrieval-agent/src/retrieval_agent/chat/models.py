"""The wire models of /v1/chat/completions and /v1/models (OpenAI's shapes plus ``rag_sources``)."""

from __future__ import annotations

import unicodedata
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, WithJsonSchema, field_validator, model_validator

from retrieval_agent.search.leniency import MAX_K, well_formed_json

# OpenAI request fields forwarded to the upstream as they came; other unknown fields are ignored
# (LiteLLM would refuse or mis-route some of them).
FORWARDED_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "user",
        "response_format",
        "logit_bias",
        "parallel_tool_calls",
        "reasoning_effort",
    }
)

# Control characters (C0, DEL, C1) and the Unicode line and paragraph separators.
_LINE_BREAKING = frozenset({"Cc", "Zl", "Zp"})


class ChatMessageIn(BaseModel):
    """One message as the client sent it; fields other than role and content go upstream unchanged."""

    model_config = ConfigDict(extra="allow")

    role: str = Field(min_length=1, max_length=32)
    content: str | list[Any] | None = None


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat request, plus ``collection_names`` (the knowledge bases to search) and the RAG
    proxy's per-request ``rag_top_k`` and ``rag_enable_tools``.

    Unknown fields are accepted (OpenAI clients send many); the sampling ones in FORWARDED_PARAMS
    reach the upstream.
    """

    model_config = ConfigDict(extra="allow")

    model: str = Field(
        min_length=1,
        max_length=1024,
        description="The upstream model, optionally with knowledge bases: gpt-4o-mini@kb-handbook, model@kb1+kb2.",
    )
    messages: list[ChatMessageIn] = Field(min_length=1, max_length=1000)
    # Strict, as OpenAI's: "true", 1 or "yes" are refused, not read as true; null is false (below).
    stream: Annotated[
        StrictBool, WithJsonSchema({"anyOf": [{"type": "boolean"}, {"type": "null"}], "default": False})
    ] = False
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="The client's own tools: passed to the model; calls to them come back to the client."
    )
    tool_choice: str | dict[str, Any] | None = None
    collection_names: list[str] | None = Field(
        default=None, max_length=1000, description="Knowledge bases to search (instead of the model-name suffix)."
    )
    stream_options: dict[str, Any] | None = Field(
        default=None, description='With stream: {"include_usage": true} adds a last chunk with the summed usage.'
    )
    # The RAG proxy's request extensions (agent-cli's): read here, never sent upstream.
    rag_top_k: Annotated[int, Field(strict=True, ge=1, le=MAX_K)] | None = Field(
        default=None,
        description=f"Passages retrieved for this turn (and per search tool call), 1 to {MAX_K}; larger is "
        "refused (400); omitted or null = CHAT_CONTEXT_K.",
    )
    rag_enable_tools: StrictBool | None = Field(
        default=None,
        description="false: the model is offered no RAG tools this turn; true or omitted: the tools when "
        "CHAT_RAG_TOOLS=true (true cannot turn on tools the server disabled).",
    )

    @model_validator(mode="before")
    @classmethod
    def _well_formed(cls, data: Any) -> Any:
        # A lone surrogate (half an emoji a JS client cut) is valid JSON but breaks the search's models
        # and the upstream request's UTF-8 encoding: U+FFFD instead, as /search does (api.leniency).
        return well_formed_json(data)

    @field_validator("stream", mode="before")
    @classmethod
    def _null_stream_is_false(cls, stream: Any) -> Any:
        # OpenAI's schema has it "boolean or null", null meaning the default.
        return False if stream is None else stream

    @field_validator("tools")
    @classmethod
    def _typed_tools(cls, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        # LiteLLM refuses malformed ones itself, as a connection error naming the value: say it here.
        for tool in tools or []:
            if not isinstance(tool.get("type"), str):
                raise ValueError('each tool needs a "type" ("function" for a function tool)')
            if tool["type"] == "function" and not _names_function(tool):
                raise ValueError('a function tool needs "function": {"name": ...}')
        return tools

    @field_validator("tool_choice")
    @classmethod
    def _named_tool_choice(cls, choice: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        if isinstance(choice, dict) and (choice.get("type") != "function" or not _names_function(choice)):
            raise ValueError('an object must name a function: {"type": "function", "function": {"name": ...}}')
        return choice

    @field_validator("model")
    @classmethod
    def _printable_model(cls, model: str) -> str:
        # The name is logged (here and by LiteLLM): a line break in it would forge a log line.
        if any(unicodedata.category(char) in _LINE_BREAKING for char in model):
            raise ValueError("must not contain control characters or line breaks")
        return model

    @property
    def include_usage(self) -> bool:
        """Whether a stream ends with a usage chunk (OpenAI's ``stream_options.include_usage``)."""
        return self.stream and bool((self.stream_options or {}).get("include_usage"))

    def forwarded_params(self) -> dict[str, Any]:
        """The sampling parameters the upstream gets."""
        extra = self.model_extra or {}
        return {key: value for key, value in extra.items() if key in FORWARDED_PARAMS and value is not None}


def _names_function(entry: dict[str, Any]) -> bool:
    function = entry.get("function")
    return isinstance(function, dict) and isinstance(function.get("name"), str) and bool(function["name"])


class RagSource(BaseModel):
    """One passage the answer may cite as ``[index]``."""

    index: int = Field(
        description="The citation number, [1] for 1: one per document, shared by all of its passages (the order "
        "in which the documents were first found)."
    )
    document: str = Field(
        description="What the number names: the source URL, else the file_id, else the file name (the "
        "metadata.source of Open WebUI's source events)."
    )
    file_name: str | None = None
    file_id: str | None = None
    path: str | None = Field(default=None, description="The file's path relative to the folder it was synced from.")
    collection_name: str | None = None
    url: str | None = Field(default=None, description="The document's http(s) source, where it has one.")
    page: int | None = Field(default=None, description="0-based page (meta.page, as Open WebUI reads it).")
    page_number: int | None = Field(default=None, description="The page as people count it (page + 1).")
    score: float = Field(description="Calibrated relevance in [0, 1] (what /search returns in distances).")
    text: str
    citation_url: str | None = Field(
        default=None,
        description="This passage's page as a PNG with the passage highlighted: a signed link to the ingestion "
        "service that opens without a key until it expires (PDFs and images, with CITATION_SIGNING_KEY and "
        "CITATION_BASE_URL set; else null).",
    )
    original_url: str | None = Field(
        default=None,
        description="The original document opened at this passage's page (#page=), signed as citation_url.",
    )


def _absent(value: object) -> bool:
    return value is None


class SourceOrigin(BaseModel):
    """The document a source event cites (Open WebUI's ``source``)."""

    id: str = Field(description="The document (RagSource.document).")
    name: str
    url: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="Its http(s) source, where it has one; else its first cited passage's citation_url, where that "
        "has one (the link Open WebUI's citation view opens).",
    )


class PassageLink(BaseModel):
    """A passage's link where the Open WebUI fork's citation modal reads it (``metadata.data.url``)."""

    url: str


class SourceMetadata(BaseModel):
    """One passage's metadata in a source event (Open WebUI numbers citations by ``source``)."""

    source: str = Field(description="The document (RagSource.document): passages sharing it are one citation.")
    name: str
    file_id: str | None = Field(default=None, exclude_if=_absent)
    collection_name: str | None = Field(default=None, exclude_if=_absent)
    page: int | None = Field(default=None, exclude_if=_absent, description="0-based (Open WebUI shows page + 1).")
    citation: int = Field(description="The citation number, [1] for 1.")
    citation_url: str | None = Field(
        default=None, exclude_if=_absent, description="This passage's highlighted page (RagSource.citation_url)."
    )
    original_url: str | None = Field(
        default=None, exclude_if=_absent, description="The original at this passage's page (RagSource.original_url)."
    )
    data: PassageLink | None = Field(
        default=None,
        exclude_if=_absent,
        description="``{url: citation_url}``: the Open WebUI fork shows it as the passage's own Source link.",
    )


class SourceEventData(BaseModel):
    """One document's passages: ``document``, ``metadata`` and ``distances`` in parallel."""

    source: SourceOrigin
    document: list[str]
    metadata: list[SourceMetadata]
    distances: list[float] = Field(description="Calibrated relevance in [0, 1], as RagSource.score.")


class SourceEvent(BaseModel):
    """Open WebUI's ``source`` event: it stores ``data`` among the message's sources and shows it as a citation."""

    type: Literal["source"] = "source"
    data: SourceEventData


class MemorySource(BaseModel):
    """One remembered fact shown to the model this turn (ENABLE_MEMORY)."""

    id: str = Field(description="The fact's id: GET /api/v1/memory/{user}/facts/{id}.")
    text: str
    score: float = Field(description="Relevance to the turn with the recency boost (the ranking's score).")
    relevance: float = Field(description="Cosine similarity between the turn and the fact.")
    updated_at: str = Field(description="When the fact was last learned or changed (RFC 3339).")


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: str | None = None


class Usage(BaseModel):
    """Token counts summed over every upstream call of the turn (tool rounds included)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def add(self, usage: object) -> None:
        """Add an upstream answer's ``usage`` (a dict, or nothing)."""
        if not isinstance(usage, dict):
            return
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            value = usage.get(key)
            if isinstance(value, int):
                setattr(self, key, getattr(self, key) + value)


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    rag_sources: list[RagSource] = Field(default_factory=lambda: list[RagSource]())
    memory_sources: list[MemorySource] = Field(
        default_factory=lambda: list[MemorySource](),
        description="The user's remembered facts given to the model (empty without ENABLE_MEMORY or a user).",
    )


class ModelCard(BaseModel):
    """One model of /v1/models: ``id`` is what a request names (``<model>@<kb>`` with a knowledge base)."""

    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str
    name: str = Field(
        description="What a person reads (Open WebUI shows it): the knowledge base's name, then the model."
    )


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class OpenAIErrorDetail(BaseModel):
    """OpenAI's error object."""

    message: str
    type: str
    code: str | None = None
    param: str | None = None


class OpenAIErrorBody(BaseModel):
    """Every failure on /v1/*: OpenAI's shape, which its SDKs parse (``error.message``)."""

    error: OpenAIErrorDetail
