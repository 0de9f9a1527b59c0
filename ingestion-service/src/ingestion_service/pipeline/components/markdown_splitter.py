"""CHUNK_SPLIT_BY=markdown: heading hierarchy first, then token packing per section."""

from __future__ import annotations

from haystack import Document, component

from ingestion_service.pipeline.chunking import markdown_sections, merge_small_sections, pack_tokens
from ingestion_service.pipeline.embed_text import EmbedTextBuilder
from ingestion_service.pipeline.observe import StageObserver, timed
from ingestion_service.pipeline.run_control import checkpoint
from shared_contract import MetaKey


@component
class MarkdownSplitter:
    """Sections by ATX heading, breadcrumb in ``meta.headers``, tiny sections merged forward.

    The heading path carries over from one input Document to the next, so an engine that
    returns a document page by page still gets full breadcrumbs.
    """

    def __init__(
        self,
        embed_text: EmbedTextBuilder,
        *,
        overlap: int,
        min_tokens: int,
        observer: StageObserver | None = None,
    ) -> None:
        self.embed_text = embed_text
        self.overlap = overlap
        self.min_tokens = min_tokens
        self.observer = observer

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """Chunks with ``meta.headers``; numbering happens later, in the finalizer."""
        chunks: list[Document] = []
        counter = self.embed_text.counter
        with timed(self.observer, "splitter"):
            stack: list[tuple[int, str]] = []
            for document in documents:
                checkpoint()
                sections, stack = markdown_sections(document.content or "", stack)
                merged = merge_small_sections(
                    sections, counter, min_tokens=self.min_tokens, budget_for=self.embed_text.content_budget
                )
                for section in merged:
                    checkpoint()
                    budget = self.embed_text.content_budget(section.headers)
                    for piece in pack_tokens(section.text, counter, budget, self.overlap):
                        chunks.append(
                            Document(content=piece, meta={**document.meta, MetaKey.HEADERS: list(section.headers)})
                        )
        return {"documents": chunks}
