"""A scripted memory model for an OpenAI-compatible test endpoint (``tests/scripted_llm.py``).

``MemoryScript`` answers the reconciler's two calls by rule, and every other request (the chat's own
completions) with ``chat_reply``:

- extraction (the ``record_facts`` output tool): the newest message is looked up in ``facts``, a table
  of lower-case phrases to the facts they state; no phrase, no facts;
- decision (the ``decide_memory_operations`` output tool): each candidate that shares a word of
  ``topics`` with a shown fact UPDATEs that fact to the candidate's text; any other candidate is an ADD.

Use it as the script of ``ScriptedLLM``: ``ScriptedLLM(MemoryScript(...))``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval_agent.memory.reconcile import DECIDE_TOOL, EXTRACT_TOOL

from ..scripted_llm import text, tool_call  # noqa: TID252

_NUMBERED = re.compile(r"^(\d+)\. (.+)$")
_CANDIDATE = re.compile(r"^- (.+) \(language: [a-z]+\)$")


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def prompt_of(body: dict[str, Any]) -> str:
    """The last user message's text (the reconciler's prompt)."""
    users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
    last = users[-1] if users else ""
    if isinstance(last, list):
        return "\n".join(part.get("text", "") for part in last if isinstance(part, dict))
    return str(last or "")


def newest_message(prompt: str) -> str:
    return prompt.split("Newest message:\n", 1)[-1].strip()


def shown_facts(prompt: str) -> list[str]:
    section = prompt.split("Existing facts:\n", 1)[-1].split("\n\nNew candidate facts:", 1)[0]
    return [match.group(2) for line in section.splitlines() if (match := _NUMBERED.match(line))]


def candidates(prompt: str) -> list[str]:
    section = prompt.split("New candidate facts:\n", 1)[-1]
    return [match.group(1) for line in section.splitlines() if (match := _CANDIDATE.match(line))]


def _words(sentence: str) -> set[str]:
    return set(re.findall(r"[a-zæøå]+", sentence.lower()))


@dataclass
class MemoryScript:
    facts: Mapping[str, Sequence[str]]
    topics: Sequence[str] = ()
    chat_reply: Callable[[dict[str, Any]], dict[str, Any]] = field(default=lambda body: text("Noted."))
    extractions: list[str] = field(default_factory=lambda: list[str]())
    decisions: list[list[dict[str, Any]]] = field(default_factory=lambda: list[list[dict[str, Any]]]())

    def extract(self, message: str) -> list[str]:
        lowered = message.lower()
        return [fact for phrase, found in self.facts.items() if phrase in lowered for fact in found]

    def decide(self, shown: Sequence[str], new: Sequence[str]) -> list[dict[str, Any]]:
        operations: list[dict[str, Any]] = []
        used: set[int] = set()
        for candidate in new:
            topic = _words(candidate) & {word.lower() for word in self.topics}
            target = next((n for n, fact in enumerate(shown, start=1) if n not in used and topic & _words(fact)), None)
            if target is None:
                operations.append({"action": "ADD", "text": candidate, "language": "en", "reason": "new"})
            else:
                used.add(target)
                operations.append(
                    {"action": "UPDATE", "fact": target, "text": candidate, "language": "en", "reason": "changed"}
                )
        return operations

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        names = tool_names(body)
        prompt = prompt_of(body)
        if EXTRACT_TOOL in names:
            message = newest_message(prompt)
            self.extractions.append(message)
            found = [{"text": fact, "language": "en"} for fact in self.extract(message)]
            return tool_call(EXTRACT_TOOL, {"facts": found})
        if DECIDE_TOOL in names:
            operations = self.decide(shown_facts(prompt), candidates(prompt))
            self.decisions.append(operations)
            return tool_call(DECIDE_TOOL, {"operations": operations})
        return self.chat_reply(body)


def memory_requests(requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reconciler's requests among everything the endpoint received."""
    return [body for body in requests if {EXTRACT_TOOL, DECIDE_TOOL} & set(tool_names(body))]
