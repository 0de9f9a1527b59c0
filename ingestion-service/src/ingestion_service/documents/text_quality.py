"""How much of a text reads as words: the measure behind re-OCRing a garbage text layer.

A word token is well-formed when it is lower case, Capitalised or ALL CAPS and, in Latin script,
has a vowel; tokens mixing letters and digits ("Universfties" passes, "pUblicUniversfties" and
"M.Weidner"-style joins fail through their case shape) count as malformed. Non-Latin scripts are
not judged. Measured on the PDFs of the eval set (docs/benchmarks.md, `benchmarks.extraction`):
text layers read without OCR score 0.80-1.00, the noisy OCR layer of kreuzberg__scanned.pdf 0.952
against 0.982 for our own OCR of the same page, unstructured__pdf-with-ocr-text.pdf 0.816 against 0.880.
"""

from __future__ import annotations

import re
import unicodedata

_TOKEN = re.compile(r"\w+", re.UNICODE)
_VOWELS = frozenset("aeiouyæøåäöüéèêëáàâíìîïóòôúùûAEIOUYÆØÅÄÖÜÉÈÊËÁÀÂÍÌÎÏÓÒÔÚÙÛ")
_SINGLE_LETTER_WORDS = frozenset("aAiIoO")


def _latin(token: str) -> bool:
    return all("LATIN" in unicodedata.name(char, "") for char in token)


def _well_formed(token: str) -> bool:
    if token.isdigit():
        return True
    if not token.isalpha():
        return False  # letters glued to digits or underscores
    if not _latin(token):
        return True
    if len(token) == 1:
        return token in _SINGLE_LETTER_WORDS
    shaped = token.islower() or token.isupper() or (token[0].isupper() and token[1:].islower())
    return shaped and any(char in _VOWELS for char in token)


def word_quality(text: str) -> float:
    """Share of well-formed tokens in ``text`` (1.0 for text without tokens)."""
    tokens = _TOKEN.findall(text)
    if not tokens:
        return 1.0
    return sum(_well_formed(token) for token in tokens) / len(tokens)
