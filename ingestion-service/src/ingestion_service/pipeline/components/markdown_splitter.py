"""CHUNK_SPLIT_BY=markdown: heading hierarchy first, then whole blocks per section (tables between rows)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from haystack import Document, component

from ingestion_service.pipeline.chunking import SectionChunk, markdown_sections, merge_small_sections
from ingestion_service.pipeline.context import document_title
from ingestion_service.pipeline.embed_text import CONTEXT_KEY, INDEX_BODY_KEY, EmbedTextBuilder
from ingestion_service.pipeline.observe import StageObserver, timed
from ingestion_service.pipeline.packing import SectionPacker
from ingestion_service.run_control import checkpoint
from shared_contract import MetaKey

# Slides: each one's heading path starts afresh (a slide without a title is not under the last one's).
PRESENTATION_TYPES = frozenset(
    {
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.ms-powerpoint",
        "application/vnd.oasis.opendocument.presentation",
    }
)


@component
class MarkdownSplitter:
    """Sections by ATX heading, breadcrumb in ``meta.headers``, small sections merged, blocks packed.

    The input Documents are one extracted file, page by page (or whole). The heading path carries
    over from one page to the next, except from slide to slide. A heading at the foot of a page, a
    small page (a title page, a page of a line or two) and a title slide open the next page's first
    chunk, so no chunk is only a heading or a title. Every chunk is indexed with the document's title and its heading
    path (``embed_text``).
    """

    def __init__(
        self,
        embed_text: EmbedTextBuilder,
        *,
        overlap: int,
        min_tokens: int,
        keyed_tables: bool = True,
        observer: StageObserver | None = None,
    ) -> None:
        self.embed_text = embed_text
        self.overlap = overlap
        self.min_tokens = min_tokens
        self.keyed_tables = keyed_tables
        self.observer = observer

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """Chunks with ``meta.headers``; numbering happens later, in the finalizer."""
        chunks: list[Document] = []
        counter = self.embed_text.counter
        with timed(self.observer, "splitter"):
            title = document_title(documents, counter, title_page_tokens=self.min_tokens)
            presentation = bool(documents) and documents[0].meta.get("mime_type") in PRESENTATION_TYPES

            def budget_for(headers: list[str]) -> int:
                return self.embed_text.content_budget(self.embed_text.context(title, headers))

            stack: list[tuple[int, str]] = []
            # Text carried from the end of one page into the next, and the heading path it starts from.
            carried = ""
            carried_stack: list[tuple[int, str]] = []
            for position, document in enumerate(documents):
                checkpoint()
                if presentation:
                    stack = []
                text = document.content or ""
                if carried:
                    text, stack, carried = f"{carried}\n\n{text}", carried_stack, ""
                page_stack = stack
                sections, stack = markdown_sections(text, stack)
                last_page = position == len(documents) - 1
                # A heading at the foot of a page stays in that page's text (a chunk is cited by its
                # page); the next page's chunks carry it in their heading path.
                merged = merge_small_sections(sections, counter, min_tokens=self.min_tokens, budget_for=budget_for)
                small = len(merged) == 1 and counter.count(merged[0].text) < self.min_tokens
                if small and not last_page and (position == 0 or not presentation):
                    # A title page (or title slide), or a page of a line or two, opens the next page's
                    # first chunk; other slides stay alone, as a slide is cited by its own number.
                    carried = f"{merged[0].text}\n\n{carried}".strip()
                    carried_stack = page_stack
                    continue
                for section in merged:
                    checkpoint()
                    chunks.extend(self._chunks(section, title, document.meta))
        return {"documents": chunks}

    def _chunks(self, section: SectionChunk, title: str | None, page_meta: dict[str, Any]) -> list[Document]:
        def budget(extra: Sequence[str]) -> int:
            return self.embed_text.content_budget(self.embed_text.context(title, section.headers, extra))

        packer = SectionPacker(self.embed_text.counter, budget, overlap=self.overlap, keyed_tables=self.keyed_tables)
        chunks: list[Document] = []
        for piece in packer.pack(section.text):
            meta: dict[str, Any] = {
                **page_meta,
                MetaKey.HEADERS: list(section.headers),
                CONTEXT_KEY: self.embed_text.context(title, section.headers, piece.context, body=piece.content),
            }
            if piece.index_body != piece.content:
                meta[INDEX_BODY_KEY] = piece.index_body
            chunks.append(Document(content=piece.content, meta=meta))
        return chunks
