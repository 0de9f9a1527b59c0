"""Exactly what is indexed for a chunk (dense, BM42, the multilingual vector and BM25), and how much
of it the chunk's own text may take.

A chunk is indexed as its *context* lines (the document's title, its heading path, and for a part
of a table cut into row groups its caption, title lines and header row), a blank line, and its
*body*: the chunk's text, or for table rows the same rows written as ``column: value``. What is
shown and cited stays the chunk's own text (``content``). The contract embedder prepends
EMBEDDING_PREFIX_DOC and the model adds its special tokens; the content budget leaves room for all
of that, so no chunk is ever truncated by a model. Where the sparse model reads the same text
through its own, shorter window (BM42's 256 tokens beside a multilingual or HTTP dense model), a
chunk fits only when both read it whole.

The splitter records a chunk's context and body in two transient meta keys (``CONTEXT_KEY``,
``INDEX_BODY_KEY``); the writer drops them from the payload and stores the indexed text in the
chunk's lexical field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ingestion_service.pipeline.chunking import pack_tokens
from ingestion_service.tokens import TokenCounter
from rag_runtime.embedding import SPECIAL_TOKENS_RESERVE, TokenWindow
from shared_contract import MetaKey

BREADCRUMB_SEPARATOR = " > "
SAFETY_MARGIN = 4  # tokenizing a concatenation can differ by a token or two at the seams
MIN_CONTENT_TOKENS = 16
CONTEXT_KEY = "_index_context"
INDEX_BODY_KEY = "_index_body"
TRANSIENT_KEYS = frozenset({CONTEXT_KEY, INDEX_BODY_KEY})


def opens_with(body: str, title: str | None) -> bool:
    """Whether ``body``'s first line, without Markdown heading marks, is ``title``."""
    if not title or not body:
        return False
    first = body.lstrip().split("\n", 1)[0].lstrip("#").strip()
    return " ".join(first.split()).casefold() == " ".join(title.split()).casefold()


class EmbedTextBuilder:
    """Builds indexed texts, contexts and content budgets from one set of limits."""

    def __init__(
        self,
        counter: TokenCounter,
        *,
        max_tokens: int,
        chunk_size: int,
        prefix: str,
        use_breadcrumb: bool,
        use_title: bool = True,
        sparse_window: TokenWindow | None = None,
    ) -> None:
        self.counter = counter
        self.max_tokens = max_tokens
        self.chunk_size = chunk_size
        self.prefix = prefix
        self.use_breadcrumb = use_breadcrumb
        self.use_title = use_title
        self._prefix_tokens = counter.count(prefix)
        self._base = max_tokens - SPECIAL_TOKENS_RESERVE - self._prefix_tokens - SAFETY_MARGIN
        if self._base < MIN_CONTENT_TOKENS:
            raise ValueError(f"EMBEDDING_PREFIX_DOC leaves fewer than {MIN_CONTENT_TOKENS} tokens of {max_tokens}")
        # Context may take at most a third of the window: beyond that it crowds out the text it describes.
        self.context_cap = max_tokens // 3
        # The sparse model's counter and limit; the splitters count in dense tokens, so this is checked
        # per chunk (``fits``) and the finalizer re-packs what overflows.
        self._sparse_counter = TokenCounter(sparse_window.tokenizer) if sparse_window is not None else None
        self._sparse_limit = sparse_window.max_tokens if sparse_window is not None else 0

    def breadcrumb(self, headers: Sequence[str] | None) -> str | None:
        """The heading path indexed with a chunk; None when off or empty."""
        if not self.use_breadcrumb or not headers:
            return None
        return BREADCRUMB_SEPARATOR.join(headers)

    def context(
        self, title: str | None, headers: Sequence[str] | None, extra: Sequence[str] = (), *, body: str = ""
    ) -> list[str]:
        """A chunk's context lines: title, heading path, ``extra`` (a continued table's caption,
        titles and header row), within ``context_cap`` tokens. The title is left out of a chunk
        whose ``body`` opens with it (a plain text's first line).

        Each line keeps at most half the cap; then lines are left out from the second on (the heading
        path first, the header row last), and the title only when it alone is still too long.
        """
        title = title if self.use_title and not opens_with(body, title) else None
        path = list(headers or [])
        if title and path and path[0] == title:
            path = path[1:]  # a document whose first heading is its title: said once
        lines = [line for line in [title, self.breadcrumb(path), *extra] if line]
        half = max(1, self.context_cap // 2)
        lines = [self._clip(line, half) for line in lines]
        while len(lines) > 1 and self._context_tokens(lines) > self.context_cap:
            del lines[1]
        if lines and self._context_tokens(lines) > self.context_cap:
            return []
        return lines

    def _clip(self, line: str, tokens: int) -> str:
        if self.counter.count(line) <= tokens:
            return line
        pieces = pack_tokens(line, self.counter, tokens, 0)
        return pieces[0] if pieces else ""

    def _context_tokens(self, lines: Sequence[str]) -> int:
        return self.counter.count("\n".join(lines) + "\n\n") if lines else 0

    def text(self, body: str, context: Sequence[str] | None) -> str:
        """The indexed text of a chunk, without the doc prefix."""
        return "\n".join([*context, "", body]) if context else body

    def indexed_text(self, content: str, meta: Mapping[str, Any]) -> str:
        """What every index reads for a chunk with this content and meta (see the module docstring).

        A chunk from a splitter that records no context is indexed with its heading path.
        """
        return self.text(*self.body_and_context(content, meta))

    def body_and_context(self, content: str, meta: Mapping[str, Any]) -> tuple[str, list[str]]:
        raw_context = meta.get(CONTEXT_KEY)
        if isinstance(raw_context, list):
            context = [str(line) for line in raw_context]
        else:
            headers = meta.get(MetaKey.HEADERS)
            crumb = self.breadcrumb(headers if isinstance(headers, list) else None)
            context = [crumb] if crumb and self.counter.count(crumb) <= self.context_cap else []
        body = meta.get(INDEX_BODY_KEY)
        return (body if isinstance(body, str) and body else content), context

    def content_budget(self, context: Sequence[str] | None) -> int:
        """How many body tokens a chunk with this context may hold."""
        return max(MIN_CONTENT_TOKENS, min(self.chunk_size, self._base - self._context_tokens(context or [])))

    def total_tokens(self, body: str, context: Sequence[str] | None) -> int:
        """Tokens the model sees for this chunk, special tokens included."""
        return self.counter.count(self.prefix + self.text(body, context)) + SPECIAL_TOKENS_RESERVE

    def sparse_tokens(self, body: str, context: Sequence[str] | None) -> int | None:
        """Tokens the sparse model sees for this chunk, special tokens included; None when only
        the dense model's window binds."""
        if self._sparse_counter is None:
            return None
        return self._sparse_counter.count(self.text(body, context)) + SPECIAL_TOKENS_RESERVE

    def overflow(self, body: str, context: Sequence[str] | None) -> float:
        """The largest share of a model's window the chunk takes (above 1: that model would cut it)."""
        share = self.total_tokens(body, context) / self.max_tokens
        sparse = self.sparse_tokens(body, context)
        return share if sparse is None else max(share, sparse / self._sparse_limit)

    def fits(self, body: str, context: Sequence[str] | None) -> bool:
        """Whether every model reads the whole chunk without truncating."""
        return self.overflow(body, context) <= 1.0
