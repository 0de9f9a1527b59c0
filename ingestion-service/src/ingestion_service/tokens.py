"""Token counting with the embedding model's tokenizer (no truncation, no special tokens)."""

from __future__ import annotations

from tokenizers import Tokenizer


class TokenCounter:
    """Counts and locates tokens; a private copy of the tokenizer with truncation/padding off."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        counting = Tokenizer.from_str(tokenizer.to_str())
        counting.no_truncation()
        counting.no_padding()
        self._tokenizer = counting

    def count(self, text: str) -> int:
        """Tokens ``text`` takes, special tokens excluded."""
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of every token in ``text``."""
        if not text:
            return []
        return [(int(start), int(end)) for start, end in self._tokenizer.encode(text, add_special_tokens=False).offsets]
