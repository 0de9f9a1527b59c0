"""CHUNK_SPLIT_BY=token: windows of the embedding model's own tokens."""

from __future__ import annotations

from haystack import Document, component

from ingestion_service.pipeline.chunking import pack_tokens
from ingestion_service.pipeline.embed_text import EmbedTextBuilder
from ingestion_service.pipeline.observe import StageObserver, timed
from ingestion_service.run_control import checkpoint
from shared_contract import MetaKey


@component
class TokenSplitter:
    """CHUNK_SIZE-token windows (capped by the model's limit) with CHUNK_OVERLAP tokens shared."""

    def __init__(self, embed_text: EmbedTextBuilder, *, overlap: int, observer: StageObserver | None = None) -> None:
        self.embed_text = embed_text
        self.overlap = overlap
        self.observer = observer

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """Token windows of every input Document, metadata copied."""
        chunks: list[Document] = []
        budget = self.embed_text.content_budget(None)
        with timed(self.observer, "splitter"):
            for document in documents:
                checkpoint()
                for piece in pack_tokens(document.content or "", self.embed_text.counter, budget, self.overlap):
                    chunks.append(Document(content=piece, meta={**document.meta, MetaKey.HEADERS: []}))
        return {"documents": chunks}
