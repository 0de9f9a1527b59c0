"""The wire models of POST /search: Open WebUI's body and response, plus the optional ``filter`` other
clients send (Open WebUI never does)."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shared_contract import CollectionName
from shared_contract.document_filter import DocumentFilter
from shared_contract.schema import MEMORY_TENANT_RULE, tenant_kind

DEFAULT_K = 5
# Open WebUI's knowledge tool searches every knowledge base the user can read (up to 50) when the
# model has none attached, else one name per attached file and knowledge base: a cap of 20 refused
# real requests. A tenant is never dropped (its sources would vanish), so the cap only bounds abuse.
MAX_COLLECTION_NAMES = 1000


class WireMessage(BaseModel):
    """A chat message as Open WebUI forwards it: text, or OpenAI-style parts (text and images)."""

    model_config = ConfigDict(extra="ignore")

    role: str = Field(max_length=32)
    content: str | list[Any] | None = None


class SearchRequest(BaseModel):
    """Open WebUI's body. ``queries`` may be ``[""]``: blank queries count as absent.

    Long queries and messages, list content, long chats and a large k are accepted and brought
    within the limits by ``api.leniency`` (the response says what changed).
    """

    model_config = ConfigDict(extra="ignore")

    queries: list[str] | None = None
    messages: list[WireMessage] | None = None
    collection_names: list[CollectionName] = Field(min_length=1, max_length=MAX_COLLECTION_NAMES)
    k: int = Field(default=DEFAULT_K, ge=1, description="Above 100 it is clamped to 100; null means the default.")
    retrieval_query_generation_prompt_template: str | None = Field(default=None, max_length=8000)
    filter: DocumentFilter | None = Field(
        default=None,
        description="Only chunks of documents matching this metadata filter, within collection_names (never wider).",
    )
    mode: Literal["linear", "agentic"] | None = Field(
        default=None,
        description="linear: the hybrid pipeline; agentic: the agent's loop (needs ENABLE_AGENTIC_RAG=true); "
        "omitted: the agent's loop when it is enabled, else linear.",
    )

    @field_validator("collection_names")
    @classmethod
    def _no_memory_tenant(cls, value: list[str]) -> list[str]:
        if any(tenant_kind(name) == "memory" for name in value):
            raise ValueError(MEMORY_TENANT_RULE)
        return value

    @field_validator("k", mode="before")
    @classmethod
    def _null_k_is_the_default(cls, value: object) -> object:
        # The knowledge tool sends the LLM's ``count`` as it came, and models that fill every
        # optional argument send null.
        if isinstance(value, bool):
            raise ValueError("must be a number, not true or false")  # pydantic reads true as 1
        return DEFAULT_K if value is None else value

    @model_validator(mode="after")
    def _needs_input(self) -> Self:
        if not self.queries and not self.messages:
            raise ValueError("at least one of queries or messages must be non-empty")
        return self


class SearchResponse(BaseModel):
    """Parallel lists of lists; by default exactly one inner list (Open WebUI reads only the first)."""

    documents: list[list[str]]
    metadatas: list[list[dict[str, Any]]] = Field(
        description="Each passage's stored meta keys named by SEARCH_METADATA_FIELDS (page 0-based), plus, with "
        "CITATION_SIGNING_KEY and CITATION_BASE_URL set and only for a passage of a PDF or an image: citation_url "
        "(its page as a PNG with the passage highlighted) and original_url (the original, #page= its page), "
        "signed links to the ingestion service that open without a key until CITATION_LINK_TTL_SECONDS pass, "
        "and data.url (citation_url again, where the Open WebUI fork's citation modal shows a passage's link)."
    )
    distances: list[list[float]]


class ErrorBody(BaseModel):
    """Every handled failure: ``{"status": false, "error", "code"}`` (flat, not nested in ``detail``)."""

    status: bool = False
    error: str
    code: str
