"""Right-to-left pages of a PDF's text layer read in reading order.

kreuzberg writes each line of a PDF's text layer in the order its words stand on the page, left to
right. For Arabic or Hebrew that is the reverse of reading order: each word's letters are right,
the words run backwards, and justified lines come out as a pipe table of word columns. Such a
chunk reads backwards to a person and to the dense model, and its words do not follow the page.
PDFium gives the same page's text in reading order, so a page kreuzberg wrote backwards takes
PDFium's text instead. Backwards means measured, not assumed: more of kreuzberg's consecutive word
pairs stand on the page in the other order than in the same one.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Final

from haystack import Document

from ingestion_service.documents.geometry import pdf_text_layer, words_of

_RIGHT_TO_LEFT: Final = frozenset({"R", "AL"})


def in_reading_order(path: Path, documents: Sequence[Document]) -> list[Document]:
    """``documents`` (a text-layer PDF's pages, ``meta.page`` 0-based), each page kreuzberg wrote
    backwards replaced by PDFium's text of it."""
    if not any(_has_right_to_left(document.content or "") for document in documents):
        return list(documents)
    read: list[Document] = []
    with pdf_text_layer(path) as layer:
        for document in documents:
            page = document.meta.get("page")
            content = document.content or ""
            layout = layer.page(page) if layer is not None and isinstance(page, int) else None
            if layout is not None and _has_right_to_left(content) and _backwards(content, layout.words):
                document = Document(content=layout.text, meta=dict(document.meta))
            read.append(document)
    return read


def _backwards(text: str, page_words: Sequence[str]) -> bool:
    """Whether more of ``text``'s consecutive word pairs stand on the page reversed than in order."""
    pairs = set(pairwise(page_words))
    forward = backward = 0
    for first, second in pairwise(words_of(text)):
        forward += (first, second) in pairs
        backward += (second, first) in pairs
    return backward > forward


def _has_right_to_left(text: str) -> bool:
    return any(unicodedata.bidirectional(char) in _RIGHT_TO_LEFT for char in text)
