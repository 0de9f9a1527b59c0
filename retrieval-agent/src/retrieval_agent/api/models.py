"""The wire models of POST /search, exactly as Open WebUI sends and reads them."""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from retrieval_agent.search.queries import ChatMessage
from shared_contract import CollectionName

QueryText = Annotated[str, StringConstraints(max_length=2000)]


class SearchRequest(BaseModel):
    """Open WebUI's body. ``queries`` may be ``[""]``: blank queries count as absent."""

    model_config = ConfigDict(extra="ignore")

    queries: list[QueryText] | None = Field(default=None, max_length=10)
    messages: list[ChatMessage] | None = Field(default=None, max_length=50)
    collection_names: list[CollectionName] = Field(min_length=1, max_length=20)
    k: int = Field(default=5, ge=1, le=100)
    retrieval_query_generation_prompt_template: str | None = Field(default=None, max_length=8000)

    @model_validator(mode="after")
    def _needs_input(self) -> Self:
        if not self.queries and not self.messages:
            raise ValueError("at least one of queries or messages must be non-empty")
        return self


class SearchResponse(BaseModel):
    """Parallel lists of lists; by default exactly one inner list (Open WebUI reads only the first)."""

    documents: list[list[str]]
    metadatas: list[list[dict[str, Any]]]
    distances: list[list[float]]


class ErrorBody(BaseModel):
    """Every handled failure: ``{"status": false, "error", "code"}`` (flat, not nested in ``detail``)."""

    status: bool = False
    error: str
    code: str
