"""Numbers chunks, enforces the model's token limit, and stamps per-chunk metadata."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime

from haystack import Document, component

from ingestion_service.errors import DocumentTooLargeError, NoExtractableTextError
from ingestion_service.pipeline.chunking import pack_tokens
from ingestion_service.pipeline.embed_text import CONTEXT_KEY, MIN_CONTENT_TOKENS, TRANSIENT_KEYS, EmbedTextBuilder
from ingestion_service.pipeline.observe import StageObserver, timed
from ingestion_service.run_control import checkpoint
from shared_contract import MetaKey
from shared_contract.schema import chunk_id

_SHRINK_STEP = 8


@component
class ChunkFinalizer:
    """The last step before embedding.

    Any chunk a model would truncate (possible after word/sentence/passage splitting, by a token
    at a concatenation seam, or where the sparse model's window is shorter than the dense one's)
    is re-packed with a smaller budget until every piece fits: there is no silent truncation.
    Then ``split_id`` runs 0..n-1 over the whole file and each
    chunk gets ``content_hash`` and ``indexed_at``, and the document's ``chunk_count`` and
    ``text_bytes`` (the documents list and collection stats read them from one chunk). Zero chunks is the documented 422; more than
    ``max_chunks`` (MAX_CHUNKS_PER_DOCUMENT) is DOCUMENT_TOO_LARGE, raised before any embedding.
    """

    def __init__(
        self,
        embed_text: EmbedTextBuilder,
        *,
        overlap: int,
        observer: StageObserver | None = None,
        max_chunks: int | None = None,
    ) -> None:
        self.embed_text = embed_text
        self.overlap = overlap
        self.observer = observer
        self.max_chunks = max_chunks

    def _too_many(self) -> DocumentTooLargeError:
        return DocumentTooLargeError(
            f"The document produces more than MAX_CHUNKS_PER_DOCUMENT ({self.max_chunks}) chunks."
        )

    def _fit(self, document: Document) -> list[tuple[str, dict[str, object]]]:
        """The chunk, or its re-packed pieces, each with the transient index keys it keeps."""
        content = document.content or ""
        body, context = self.embed_text.body_and_context(content, document.meta)
        index_keys = {key: document.meta[key] for key in TRANSIENT_KEYS if key in document.meta}
        if self.embed_text.fits(body, context):
            return [(content, index_keys)]
        # Re-packed pieces are indexed as their own text (a table's keyed rows no longer match them).
        keys: dict[str, object] = {CONTEXT_KEY: context} if CONTEXT_KEY in document.meta else {}
        budget = self.embed_text.content_budget(context)
        while True:
            pieces = pack_tokens(content, self.embed_text.counter, budget, min(self.overlap, budget // 4))
            worst = max((self.embed_text.overflow(piece, context) for piece in pieces), default=0.0)
            if worst <= 1.0 or budget <= MIN_CONTENT_TOKENS:
                return [(piece, keys) for piece in pieces]
            # A seam token or two: step down. A sparse window far below the dense one: jump close
            # to the size that fits instead of re-packing dozens of times.
            budget = max(MIN_CONTENT_TOKENS, min(budget - _SHRINK_STEP, int(budget / worst)))

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document], sources: list[Document] | None = None) -> dict[str, list[Document]]:
        """Budget-checked, numbered, stamped chunks; with ``sources`` (the extracted documents they
        were split from), each chunk's ``char_start`` in them."""
        with timed(self.observer, "finalizer"):
            indexed_at = datetime.now(UTC).isoformat()
            chunks: list[Document] = []
            if self.max_chunks is not None and len(documents) > self.max_chunks:
                raise self._too_many()
            for document in documents:
                checkpoint()
                headers = list(document.meta.get(MetaKey.HEADERS) or [])
                own_meta = {key: value for key, value in document.meta.items() if key not in TRANSIENT_KEYS}
                for piece, index_keys in self._fit(document):
                    if not piece.strip():
                        continue
                    split_id = len(chunks)
                    if self.max_chunks is not None and split_id >= self.max_chunks:
                        raise self._too_many()
                    meta = {
                        **own_meta,
                        **index_keys,
                        MetaKey.HEADERS: headers,
                        MetaKey.SPLIT_ID: split_id,
                        MetaKey.CONTENT_HASH: hashlib.sha256(piece.encode()).hexdigest(),
                        MetaKey.INDEXED_AT: indexed_at,
                    }
                    chunks.append(replace(document, id=chunk_id(meta, split_id), content=piece, meta=meta))
            if not chunks:
                raise NoExtractableTextError("splitting produced no chunks")
            if sources is not None:
                stamp_offsets(chunks, sources)
            text_bytes = sum(len((chunk.content or "").encode()) for chunk in chunks)
            for chunk in chunks:
                chunk.meta[MetaKey.CHUNK_COUNT] = len(chunks)
                chunk.meta[MetaKey.TEXT_BYTES] = text_bytes
        return {"documents": chunks}


# Pages are joined with a blank line, as the document's whole text is read.
PAGE_SEPARATOR = "\n\n"
# Text between two chunks the splitters may drop (blank lines, a page break, markup).
_OFFSET_SLACK = 512


def stamp_offsets(chunks: list[Document], sources: list[Document]) -> None:
    """Each chunk's ``char_start`` in the sources' joined text, found in order (chunks follow the text,
    overlapping): a chunk that is no verbatim piece of it (a table with its header repeated) gets none.

    Each search looks only as far as the last chunk found and the chunks since can reach, so a
    document of many such chunks costs linear time, not a scan of the rest of the text per chunk.
    """
    text = PAGE_SEPARATOR.join(source.content or "" for source in sources)
    previous, covered = -1, 0
    for chunk in chunks:
        piece = chunk.content or ""
        covered += len(piece) + _OFFSET_SLACK
        start = text.find(piece, previous + 1, previous + 1 + covered)
        if start < 0:
            continue
        chunk.meta[MetaKey.CHAR_START] = start
        # The next chunk starts at the latest where this one ends (and what the splitters dropped).
        previous, covered = start, len(piece)
