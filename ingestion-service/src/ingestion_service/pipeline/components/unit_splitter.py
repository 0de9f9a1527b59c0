"""CHUNK_SPLIT_BY=word/sentence/passage: Haystack's DocumentSplitter."""

from __future__ import annotations

from typing import Any, Literal

from haystack import Document, component
from haystack.components.preprocessors import DocumentSplitter

from ingestion_service.pipeline.observe import StageObserver, timed
from ingestion_service.run_control import checkpoint
from shared_contract import MetaKey

# Haystack's "sentence" unit needs NLTK (not a dependency); "period" splits at full stops.
_HAYSTACK_UNIT: dict[str, Literal["word", "period", "passage"]] = {
    "word": "word",
    "sentence": "period",
    "passage": "passage",
}
# Bookkeeping keys DocumentSplitter adds; the finalizer numbers chunks itself.
_SPLITTER_KEYS = frozenset({"source_id", "page_number", "split_id", "split_idx_start", "_split_overlap"})


def _own_meta(document: Document) -> dict[str, Any]:
    return {key: value for key, value in document.meta.items() if key not in _SPLITTER_KEYS}


@component
class UnitSplitter:
    """CHUNK_SIZE units per chunk, CHUNK_OVERLAP units shared; the finalizer enforces token limits."""

    def __init__(self, unit: str, *, size: int, overlap: int, observer: StageObserver | None = None) -> None:
        self.unit = unit
        self.observer = observer
        self._splitter = DocumentSplitter(split_by=_HAYSTACK_UNIT[unit], split_length=size, split_overlap=overlap)
        self._splitter.warm_up()

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """Split, keeping each input's metadata."""
        with timed(self.observer, "splitter"):
            checkpoint()
            non_empty = [document for document in documents if (document.content or "").strip()]
            split: list[Document] = self._splitter.run(documents=non_empty)["documents"]
            chunks = [
                Document(content=(document.content or "").strip(), meta={**_own_meta(document), MetaKey.HEADERS: []})
                for document in split
                if (document.content or "").strip()
            ]
        return {"documents": chunks}
