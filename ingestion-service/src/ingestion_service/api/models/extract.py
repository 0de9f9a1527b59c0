"""Wire models of POST /api/v1/extract."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ExtractedDocument(BaseModel):
    """One document the converter produced."""

    content: str
    meta: dict[str, Any]


class EngineError(BaseModel):
    """Why one engine of a comparison failed (the shared error codes)."""

    code: str
    error: str


class EngineResult(BaseModel):
    """One engine's reading of the file: what it produced, how long it took, or why it failed."""

    engine: str
    profile: str | None = None
    route: str | None = Field(default=None, description="auto only: the routing decision.")
    seconds: float
    characters: int = 0
    pages: int = Field(default=0, description="Documents carrying a page number (0 when the engine gives none).")
    documents: list[ExtractedDocument] = Field(default_factory=lambda: list[ExtractedDocument]())
    error: EngineError | None = None


class ExtractResponse(BaseModel):
    """200 body of POST /api/v1/extract.

    One engine: ``engine``, ``profile``, ``documents`` plus time, characters and pages. Several
    (``engines=a,b,c``): ``results`` side by side, one per engine, each with its own error if it failed;
    the top-level fields then describe the first engine that succeeded.
    """

    status: bool = True
    engine: str
    profile: str | None = None
    route: str | None = None
    seconds: float = 0.0
    characters: int = 0
    pages: int = 0
    documents: list[ExtractedDocument]
    results: list[EngineResult] | None = None
