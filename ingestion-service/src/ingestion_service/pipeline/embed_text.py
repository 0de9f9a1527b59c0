"""Exactly what the dense embedder reads for a chunk, and how many content tokens fit.

The embedded text is ``breadcrumb + "\\n\\n" + content`` when EMBED_HEADERS_BREADCRUMB is on and
the chunk has headers (the stored content stays raw); the contract embedder prepends
EMBEDDING_PREFIX_DOC; the model adds its special tokens. The content budget leaves room for all
of that, so no chunk is ever truncated by the model. Where the sparse model reads the same text
through its own, shorter window (BM42's 256 tokens beside a multilingual or HTTP dense model), a
chunk fits only when both read it whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from ingestion_service.pipeline.tokens import TokenCounter
from shared_contract.embedding import SPECIAL_TOKENS_RESERVE, TokenWindow

BREADCRUMB_SEPARATOR = " > "
SAFETY_MARGIN = 4  # tokenizing a concatenation can differ by a token or two at the seams
MIN_CONTENT_TOKENS = 16


class EmbedTextBuilder:
    """Builds embedding inputs and content budgets from one set of limits."""

    def __init__(
        self,
        counter: TokenCounter,
        *,
        max_tokens: int,
        chunk_size: int,
        prefix: str,
        use_breadcrumb: bool,
        sparse_window: TokenWindow | None = None,
    ) -> None:
        self.counter = counter
        self.max_tokens = max_tokens
        self.chunk_size = chunk_size
        self.prefix = prefix
        self.use_breadcrumb = use_breadcrumb
        self._prefix_tokens = counter.count(prefix)
        self._base = max_tokens - SPECIAL_TOKENS_RESERVE - self._prefix_tokens - SAFETY_MARGIN
        if self._base < MIN_CONTENT_TOKENS:
            raise ValueError(f"EMBEDDING_PREFIX_DOC leaves fewer than {MIN_CONTENT_TOKENS} tokens of {max_tokens}")
        # The sparse model's counter and limit; the splitters count in dense tokens, so this is checked
        # per chunk (``fits``) and the finalizer re-packs what overflows.
        self._sparse_counter = TokenCounter(sparse_window.tokenizer) if sparse_window is not None else None
        self._sparse_limit = sparse_window.max_tokens if sparse_window is not None else 0

    def breadcrumb(self, headers: Sequence[str] | None) -> str | None:
        """The breadcrumb embedded with a chunk; None when off, empty, or too long to be worth it."""
        if not self.use_breadcrumb or not headers:
            return None
        crumb = BREADCRUMB_SEPARATOR.join(headers)
        # A breadcrumb may take at most a quarter of the model's window; beyond that it would
        # crowd out the content it describes.
        if self.counter.count(crumb + "\n\n") > self.max_tokens // 4:
            return None
        return crumb

    def text(self, content: str, headers: Sequence[str] | None) -> str:
        """The text given to the dense (and sparse) embedder, without the doc prefix."""
        crumb = self.breadcrumb(headers)
        return f"{crumb}\n\n{content}" if crumb else content

    def content_budget(self, headers: Sequence[str] | None) -> int:
        """How many content tokens a chunk with these headers may hold."""
        crumb = self.breadcrumb(headers)
        crumb_tokens = self.counter.count(crumb + "\n\n") if crumb else 0
        return max(MIN_CONTENT_TOKENS, min(self.chunk_size, self._base - crumb_tokens))

    def total_tokens(self, content: str, headers: Sequence[str] | None) -> int:
        """Tokens the model sees for this chunk, special tokens included."""
        return self.counter.count(self.prefix + self.text(content, headers)) + SPECIAL_TOKENS_RESERVE

    def sparse_tokens(self, content: str, headers: Sequence[str] | None) -> int | None:
        """Tokens the sparse model sees for this chunk, special tokens included; None when only
        the dense model's window binds."""
        if self._sparse_counter is None:
            return None
        return self._sparse_counter.count(self.text(content, headers)) + SPECIAL_TOKENS_RESERVE

    def overflow(self, content: str, headers: Sequence[str] | None) -> float:
        """The largest share of a model's window the chunk takes (above 1: that model would cut it)."""
        share = self.total_tokens(content, headers) / self.max_tokens
        sparse = self.sparse_tokens(content, headers)
        return share if sparse is None else max(share, sparse / self._sparse_limit)

    def fits(self, content: str, headers: Sequence[str] | None) -> bool:
        """Whether every model reads the whole chunk without truncating."""
        return self.overflow(content, headers) <= 1.0
