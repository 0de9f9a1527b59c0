"""How extracted text is cut into chunks and what is indexed with each."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from rag_runtime.lexical import DEFAULT_LEXICAL_WINDOW
from shared_contract import ContractConfigError
from shared_contract.settings import Fingerprint, SettingsGroup

SplitBy = Literal["token", "markdown", "word", "sentence", "passage"]


class ChunkingSettings(SettingsGroup):
    """The splitter, its sizes and the context indexed beside each chunk."""

    # Chunking.
    chunk_split_by: Annotated[SplitBy, Fingerprint.SHAPES] = "markdown"
    chunk_size: Annotated[int, Fingerprint.SHAPES] = Field(default=400, gt=0, le=100_000)
    chunk_overlap: Annotated[int, Fingerprint.SHAPES] = Field(default=80, ge=0)
    chunk_min_size: Annotated[int, Fingerprint.SHAPES] = Field(default=100, ge=0)
    tokenizer_model: Annotated[str | None, Fingerprint.SHAPES] = None
    tokenizer_revision: Annotated[str | None, Fingerprint.SHAPES] = None
    embed_headers_breadcrumb: Annotated[bool, Fingerprint.SHAPES] = True
    embed_document_title: Annotated[bool, Fingerprint.SHAPES] = Field(
        default=True, description="Index every chunk with its document's title (the shown text stays the chunk's own)."
    )
    chunk_table_rows: Annotated[Literal["pairs", "markdown"], Fingerprint.SHAPES] = Field(
        default="pairs",
        description="How table rows are indexed: 'pairs' as 'column: value' per row, 'markdown' as the table's own rows.",
    )
    lexical_window_chunks: Annotated[int, Fingerprint.SHAPES] = Field(
        default=DEFAULT_LEXICAL_WINDOW,
        ge=0,
        le=8,
        description="Neighbour chunks on each side whose text joins a chunk's BM25 entry (0 = the chunk alone).",
    )

    @model_validator(mode="after")
    def _chunk_bounds(self) -> Self:
        if self.chunk_overlap >= self.chunk_size:
            raise ContractConfigError("CHUNK_OVERLAP", f"must be smaller than CHUNK_SIZE ({self.chunk_size})")
        if self.chunk_min_size > self.chunk_size:
            raise ContractConfigError("CHUNK_MIN_SIZE", f"must lie in [0, CHUNK_SIZE={self.chunk_size}]")
        return self
