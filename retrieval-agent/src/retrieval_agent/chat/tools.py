"""The RAG tools the chat model may call, run here: ``read_full_document`` and ``search``.

Both are bound to the turn's knowledge bases: a file_id or a query never reaches another tenant.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Final

from pydantic import BaseModel, Field, ValidationError

from retrieval_agent.agent.documents import read_whole_document
from retrieval_agent.chat.context import SourceBook, passage
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.pipeline import LinearSearch
from shared_contract import ContractError, MetaKey

logger = logging.getLogger(__name__)

READ_TOOL: Final = "read_full_document"
SEARCH_TOOL: Final = "search"
TOOL_NAMES: Final = frozenset({READ_TOOL, SEARCH_TOOL})
_MAX_QUERY_CHARS = 2000
# Far above any real call (a file_id; a query is cut at _MAX_QUERY_CHARS): the model's output is unbounded.
_MAX_ARGUMENT_CHARS = 32_000


class _UnreadableArguments(ValueError):
    """Tool arguments refused before parsing, or that the parser gave up on."""


def _decoded(arguments: str) -> Any:
    """A tool call's JSON arguments (json.JSONDecodeError when they are not JSON)."""
    if len(arguments) > _MAX_ARGUMENT_CHARS:
        raise _UnreadableArguments(f"longer than {_MAX_ARGUMENT_CHARS} characters")
    try:
        return json.loads(arguments or "{}")
    except RecursionError:
        # The model wrote them: "[[[[..." is a bad call to tell it about, not a failed turn.
        raise _UnreadableArguments("nested too deeply") from None


class _ReadArguments(BaseModel):
    file_id: str = Field(min_length=1, max_length=512)


class _SearchArguments(BaseModel):
    query: str = Field(min_length=1)


def tool_schemas() -> list[dict[str, Any]]:
    """The two tools in OpenAI's function format."""
    return [
        {
            "type": "function",
            "function": {
                "name": READ_TOOL,
                "description": "Read a whole document of the knowledge base, rebuilt from its passages. Use it when "
                "the passages are not enough; file_id is the one a passage shows.",
                "parameters": {
                    "type": "object",
                    "properties": {"file_id": {"type": "string", "description": "The file_id a passage shows."}},
                    "required": ["file_id"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": SEARCH_TOOL,
                "description": "Search the knowledge base again with a new query. Returns numbered passages to cite "
                "like the others.",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string", "description": "What to look for."}},
                    "required": ["query"],
                    "additionalProperties": False,
                },
            },
        },
    ]


class RagTools:
    """The tools of one chat turn: its knowledge bases, its sources (a search adds to them)."""

    def __init__(
        self,
        search: LinearSearch,
        collection_names: Sequence[str],
        book: SourceBook,
        *,
        k: int,
        document_max_chars: int,
        metrics: SearchMetrics,
    ) -> None:
        self.search = search
        self.collection_names = list(collection_names)
        self.book = book
        self.k = k
        self.document_max_chars = document_max_chars
        self.metrics = metrics

    async def run(self, name: str, arguments: str) -> str:
        """The tool's result as the text the model reads; bad arguments and store failures are told to it."""
        self.metrics.chat_tool_calls.labels(tool=name if name in TOOL_NAMES else "unknown").inc()
        try:
            raw = _decoded(arguments)
            if name == READ_TOOL:
                return await self._read(_ReadArguments.model_validate(raw).file_id)
            if name == SEARCH_TOOL:
                return await self._search(_SearchArguments.model_validate(raw).query)
        except (ValueError, ValidationError) as exc:  # json.JSONDecodeError is a ValueError
            why = str(exc) if isinstance(exc, _UnreadableArguments) else exc.__class__.__name__
            return f"Error: invalid arguments for {name}: {why}. Call it again with valid JSON."
        except ContractError as exc:
            # The store or the embedder failed: the model answers from what it has.
            logger.warning("chat tool %s failed: %s", name, exc)
            return f"Error: {name} failed ({exc.__class__.__name__}); answer from the passages you have."
        return f"Error: there is no tool named {name!r}; the tools are {READ_TOOL} and {SEARCH_TOOL}."

    async def _read(self, file_id: str) -> str:
        document = await read_whole_document(
            self.search.store, file_id, self.collection_names, max_chars=self.document_max_chars
        )
        if document is None:
            return f"No document with file_id {file_id!r} in the knowledge bases of this chat."
        name = document.meta.get(MetaKey.NAME) or document.meta.get(MetaKey.SOURCE) or file_id
        note = " (cut: only its beginning is shown)" if document.truncated else ""
        return f"Document {name} (file_id: {file_id}){note}:\n\n{document.text}"

    async def _search(self, query: str) -> str:
        # The model wrote the query: no LLM rewrites it.
        outcome = await self.search.search(
            queries=[query[:_MAX_QUERY_CHARS]],
            messages=None,
            collection_names=self.collection_names,
            k=self.k,
            use_generator=False,
        )
        hits = outcome.result_sets[0] if outcome.result_sets else []
        if not hits:
            return f"No passages found for {query!r}."
        return "\n\n".join(passage(self.book.add(hit)) for hit in hits)
