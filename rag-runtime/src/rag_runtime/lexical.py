"""The language-aware lexical (BM25) layout both services share.

A full-text index has one stemmer, so every supported language gets its own payload field
(``lexical_<code>``) with a Snowball stemmer and stop words, and every other language goes to an
unstemmed fallback field. Each chunk's text is copied into exactly one of them, chosen from the
document's detected languages; ``meta.lexical_language`` records which, so search can ask only
the fields present in the requested tenants.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from qdrant_client import models

from shared_contract.schema import MetaKey

LEXICAL_FIELD_PREFIX: Final = "lexical_"
FALLBACK_LANGUAGE: Final = "any"


@dataclass(frozen=True, slots=True)
class LexicalLanguage:
    """One stemmed lexical field: its code, Snowball stemmer and stop-word list."""

    code: str
    snowball: models.SnowballLanguage
    stopwords: models.Language

    @property
    def field(self) -> str:
        """The payload field holding chunks in this language."""
        return lexical_field(self.code)


# Snowball stemmers with stop-word lists in Qdrant, for the languages our users write in.
LEXICAL_LANGUAGES: Final[tuple[LexicalLanguage, ...]] = (
    LexicalLanguage("da", models.SnowballLanguage.DANISH, models.Language.DANISH),
    LexicalLanguage("de", models.SnowballLanguage.GERMAN, models.Language.GERMAN),
    LexicalLanguage("en", models.SnowballLanguage.ENGLISH, models.Language.ENGLISH),
    LexicalLanguage("es", models.SnowballLanguage.SPANISH, models.Language.SPANISH),
    LexicalLanguage("fi", models.SnowballLanguage.FINNISH, models.Language.FINNISH),
    LexicalLanguage("fr", models.SnowballLanguage.FRENCH, models.Language.FRENCH),
    LexicalLanguage("it", models.SnowballLanguage.ITALIAN, models.Language.ITALIAN),
    LexicalLanguage("nl", models.SnowballLanguage.DUTCH, models.Language.DUTCH),
    LexicalLanguage("no", models.SnowballLanguage.NORWEGIAN, models.Language.NORWEGIAN),
    LexicalLanguage("pt", models.SnowballLanguage.PORTUGUESE, models.Language.PORTUGUESE),
    LexicalLanguage("sv", models.SnowballLanguage.SWEDISH, models.Language.SWEDISH),
)
_BY_CODE: Final = {language.code: language for language in LEXICAL_LANGUAGES}
# Bokmål and Nynorsk share the Norwegian stemmer.
_ALIASES: Final = {"nb": "no", "nn": "no"}


def lexical_field(code: str) -> str:
    """``lexical_<code>``; ``lexical_any`` is the unstemmed fallback."""
    return f"{LEXICAL_FIELD_PREFIX}{code}"


def lexical_language_for(languages: Iterable[str] | None) -> str:
    """The lexical language of a chunk: the first detected language we stem, else the fallback."""
    for code in languages or ():
        normalized = _ALIASES.get(code.lower(), code.lower())
        if normalized in _BY_CODE:
            return normalized
    return FALLBACK_LANGUAGE


def chunk_lexical_language(meta: Mapping[str, Any]) -> str:
    """The lexical language of a chunk with this meta (what ``meta.lexical_language`` records): its
    own ``language`` where it has one, else its document's ``languages``."""
    language = meta.get(MetaKey.LANGUAGE)
    if isinstance(language, str) and language:
        return lexical_language_for([language])
    languages = meta.get(MetaKey.LANGUAGES)
    return lexical_language_for(languages if isinstance(languages, list) else None)


def lexical_fields(codes: Sequence[str]) -> list[str]:
    """Fields to query for the lexical languages present in a tenant set (unknown codes dropped)."""
    known = [code for code in codes if code in _BY_CODE or code == FALLBACK_LANGUAGE]
    return [lexical_field(code) for code in sorted(set(known))]


def text_index_params(code: str) -> models.TextIndexParams:
    """The full-text index of one lexical field: BM25 scoring, stemmed and stop-worded when known."""
    language = _BY_CODE.get(code)
    if language is None:
        # Unknown languages: no stemming or stop words, and a tokenizer that splits CJK too.
        return models.TextIndexParams(
            type=models.TextIndexType.TEXT,
            tokenizer=models.TokenizerType.MULTILINGUAL,
            lowercase=True,
            scoring=models.TextScoringParams(type=models.TextScoringType.BM25),
        )
    return models.TextIndexParams(
        type=models.TextIndexType.TEXT,
        tokenizer=models.TokenizerType.WORD,
        lowercase=True,
        stopwords=language.stopwords,
        stemmer=models.SnowballParams(type=models.Snowball.SNOWBALL, language=language.snowball),
        scoring=models.TextScoringParams(type=models.TextScoringType.BM25),
    )


def all_lexical_codes() -> list[str]:
    """Every lexical language code, the fallback last."""
    return [language.code for language in LEXICAL_LANGUAGES] + [FALLBACK_LANGUAGE]


# Chunks a BM25 entry spans on either side of its own chunk (LEXICAL_WINDOW_CHUNKS). Windows lift
# passage retrieval (NorQuAD) but blur which chunk holds the answer on real documents, so the
# default is the chunk alone (docs/benchmarks.md, "Lexical windows").
DEFAULT_LEXICAL_WINDOW: Final = 0
# How far back in the previous chunk the splitter's overlap can start (characters).
_OVERLAP_SEARCH_CHARS: Final = 4000
_OVERLAP_PROBE_CHARS: Final = 12


def _new_text(previous: str, current: str) -> str:
    """``current`` without the prefix it repeats from the end of ``previous`` (the chunk overlap)."""
    probe = current[:_OVERLAP_PROBE_CHARS]
    if len(probe) == _OVERLAP_PROBE_CHARS:
        # The leftmost match that runs to the end of ``previous`` is the longest overlap.
        start = previous.find(probe, max(0, len(previous) - _OVERLAP_SEARCH_CHARS))
        while start >= 0:
            if current.startswith(previous[start:]):
                return current[len(previous) - start :]
            start = previous.find(probe, start + 1)
    return "\n" + current


def lexical_windows(texts: Sequence[str], radius: int) -> list[str]:
    """The BM25 text of each chunk of one document (chunks in order): the chunk with up to
    ``radius`` neighbours on either side, the splitter's overlap between neighbours written once,
    then the chunk's own text again.

    Only the lexical field gets the window; the dense and sparse vectors and ``content`` stay the
    chunk's own, so search still returns (and the other legs still rank) the chunk itself.
    """
    if radius < 0:
        raise ValueError("radius must be >= 0")
    if radius == 0:
        return list(texts)
    new_parts = [texts[0], *(_new_text(texts[i - 1], texts[i]) for i in range(1, len(texts)))] if texts else []
    windows = []
    for index in range(len(texts)):
        low, high = max(0, index - radius), min(len(texts), index + radius + 1)
        # The chunk's own text a second time: among neighbours sharing the same terms, the one
        # that holds them ranks first (+0.037 hit@1 on the real documents against a plain window).
        windows.append(texts[low] + "".join(new_parts[low + 1 : high]) + "\n" + texts[index])
    return windows
