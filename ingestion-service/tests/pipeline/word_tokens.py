"""A model-free token counter for the pure chunking tests: one token per word or punctuation mark."""

from __future__ import annotations

from tokenizers import Tokenizer, models, pre_tokenizers

from ingestion_service.tokens import TokenCounter


def word_counter() -> TokenCounter:
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return TokenCounter(tokenizer)
