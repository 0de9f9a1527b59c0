"""The agent's instructions and the prompt of one request.

The limits the prompt states (retrieve calls, queries per call) are also enforced in code
(``agent/loop.py``, ``agent/tools.py``): the prompt only saves the model a refused call.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from datetime import UTC, datetime

from retrieval_agent.search.queries import ChatMessage

DEFAULT_SYSTEM_PROMPT = """You are the search step of a document assistant. You do not answer the user. You find \
the documents an assistant needs to answer the user's latest message, using the tools.

How to search:
1. Write 1 or 2 short search queries in the language of the conversation. Resolve pronouns and \
references from the conversation; prefer names and specific keywords over full sentences.
2. Call `retrieve` once with them.
3. Read the previews. If ANY result is on topic, stop: reply with the single word DONE. Do not look \
for better results.
4. Only if every result is off topic, call `retrieve` again with rewritten queries (other words, \
synonyms, broader or narrower). You have at most $max_iterations `retrieve` calls in total.

Other tools:
- `read_document(file_id)`: the whole document, for questions that need more than one passage \
(summarise a document, every step of a procedure, compare sections). Use a file_id from the results \
or from `list_documents`; never invent one.
- `list_documents(filters, recent)`: which documents exist, by name, language or date, or the most \
recently added ones (recent=true). The order of a listing says nothing about relevance.

Use filters only when the user names a file, a language or a period. Today's date is $current_date."""


def system_prompt(template: str, *, max_iterations: int, now: datetime | None = None) -> str:
    """AGENT_SYSTEM_PROMPT (or the built-in prompt) with ``$max_iterations`` and ``$current_date`` filled in."""
    current = (now or datetime.now(UTC)).date().isoformat()
    return string.Template(template.strip() or DEFAULT_SYSTEM_PROMPT).safe_substitute(
        max_iterations=max_iterations, current_date=current
    )


def user_prompt(messages: Sequence[ChatMessage], queries: Sequence[str]) -> str:
    """The conversation (already cut to AGENT_CONVERSATION_HISTORY_MESSAGES) and any explicit queries."""
    parts: list[str] = []
    if messages:
        history = "\n".join(f"{message.role.upper()}: {message.content}" for message in messages)
        parts.append(f"Conversation (most recent last):\n{history}")
    if queries:
        listed = "\n".join(f"- {query}" for query in queries)
        label = "The caller also asks to search for" if messages else "Search request"
        parts.append(f"{label}:\n{listed}")
    parts.append("Find the documents needed to answer the latest user message." if messages else "Find them.")
    return "\n\n".join(parts)
