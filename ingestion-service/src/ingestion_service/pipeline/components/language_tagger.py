"""Each chunk's own language and its document's, from the contract's one detector."""

from __future__ import annotations

from haystack import Document, component

from ingestion_service.pipeline.observe import StageObserver, timed
from ingestion_service.run_control import checkpoint
from rag_runtime.language_id import DOCUMENT_SAMPLE_CHARS, LanguageIdentifier
from shared_contract import MetaKey


@component
class LanguageTagger:
    """Sets ``meta.language`` on every chunk and ``meta.languages`` to the document's language.

    The document's language is read from the start of its chunks' text; where the detector is not
    sure, the extractor's label stays. A chunk's own language is its label when the detector is
    sure of it, else the document's: a Spanish passage of an English document is indexed as Spanish
    (its stemmer, the multilingual vector), a short or numeric chunk as its document.
    """

    def __init__(self, identifier: LanguageIdentifier, *, observer: StageObserver | None = None) -> None:
        self.identifier = identifier
        self.observer = observer

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """The chunks, each with ``language`` (when known) and the document's ``languages``."""
        with timed(self.observer, "language_tagger"):
            sample: list[str] = []
            size = 0
            for document in documents:
                if size >= DOCUMENT_SAMPLE_CHARS:
                    break
                sample.append(document.content or "")
                size += len(sample[-1])
            detected = self.identifier.document_language("\n\n".join(sample))
            for document in documents:
                checkpoint()
                extracted = document.meta.get(MetaKey.LANGUAGES)
                if detected is not None:
                    document.meta[MetaKey.LANGUAGES] = [detected]
                fallback = detected or (extracted[0] if isinstance(extracted, list) and extracted else None)
                language = self.identifier.chunk_language(document.content or "", fallback)
                if language is not None:
                    document.meta[MetaKey.LANGUAGE] = language
        return {"documents": documents}
