"""The multilingual dense vector, for the chunks outside the dense model's languages."""

from __future__ import annotations

from collections.abc import Callable

from haystack import Document, component

from ingestion_service.errors import EmbeddingFailedError
from ingestion_service.pipeline.embed_slices import embed_in_slices
from ingestion_service.pipeline.embed_text import EmbedTextBuilder
from ingestion_service.pipeline.observe import StageObserver, timed
from rag_runtime.embedding.multilingual import MultilingualEmbedder


@component
class MultilingualDenseEmbedder:
    """``text-dense-multilingual`` for each chunk whose lexical language the dense model does not read.

    Embeds the text the dense model read. Vectors go out beside the documents, keyed by chunk id
    (a Haystack Document holds one dense embedding). ``active``: whether the collection has the
    vector (its manifest says so; a collection built without it is written without it).
    """

    def __init__(
        self,
        embedder: MultilingualEmbedder,
        embed_text: EmbedTextBuilder,
        *,
        active: Callable[[], bool],
        observer: StageObserver | None = None,
    ) -> None:
        self.embedder = embedder
        self.embed_text = embed_text
        self.active = active
        self.observer = observer

    @component.output_types(documents=list[Document], multilingual=dict[str, list[float]])
    def run(self, documents: list[Document]) -> dict[str, object]:
        """The documents unchanged, and ``{chunk id: vector}`` for those that need one."""
        with timed(self.observer, "multilingual_embedder"):
            active = self.active()
            chosen = [document for document in documents if active and self.embedder.needs_vector(document.meta)]
            texts = [self.embed_text.indexed_text(doc.content or "", doc.meta) for doc in chosen]
            vectors = embed_in_slices(
                texts, self.embedder.embed_documents, EmbeddingFailedError, "embedding_multilingual"
            )
        return {
            "documents": documents,
            "multilingual": {doc.id: vector for doc, vector in zip(chosen, vectors, strict=True)},
        }
