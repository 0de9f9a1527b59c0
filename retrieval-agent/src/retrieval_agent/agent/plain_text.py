"""Queries from a model that answered in text instead of calling ``retrieve``.

Small and local models often write the call as text: JSON (``{"queries": [...]}``, a list, or an
OpenAI-style ``{"name": "retrieve", "arguments": ...}``), Mistral's ``[TOOL_CALLS]`` form, a Python-like
``retrieve(queries=[...])``, or a numbered or bulleted list. Each is read here; anything else is
read line by line, and lines that look like prose or acknowledgements are dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

MAX_QUERIES = 3
MAX_QUERY_CHARS = 2000
# A "query" longer than this is an explanation, not a search.
_MAX_QUERY_WORDS = 40
# The shapes above nest a few levels (a list of calls, a call, its arguments, the queries); deeper is not queries.
_MAX_DEPTH = 8
_FENCE = re.compile(r"```(?:json|python)?\s*(.*?)```", re.DOTALL)
_CALL = re.compile(r"retrieve\s*\((.*)\)", re.DOTALL)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)]|query\s*\d*\s*:)\s*", re.IGNORECASE)
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)+)"')
# Acknowledgements a model writes after judging results (also in Danish and Norwegian).
_NOT_QUERIES = frozenset({"done", "ok", "okay", "none", "n/a", "stop", "finished", "færdig", "ferdig", "yes", "no"})


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """The query strings inside a decoded JSON value of any of the shapes above."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, depth + 1)
    elif isinstance(value, dict):
        for key in ("queries", "query", "arguments", "parameters", "args", "input"):
            if key in value:
                inner = value[key]
                if isinstance(inner, str) and key in ("arguments", "parameters", "args", "input"):
                    inner = _loads(inner)
                yield from _strings(inner, depth + 1)
                return


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        return None  # "[[[[..." nested past the stack: not queries (json.loads recurses per level)
    except ValueError:
        return None


def _json_candidates(text: str) -> Iterator[str]:
    for fenced in _FENCE.findall(text):
        yield fenced.strip()
    stripped = text.strip()
    if stripped.startswith("[TOOL_CALLS]"):
        body = stripped.removeprefix("[TOOL_CALLS]").strip()
        # ``[TOOL_CALLS]retrieve{"queries": [...]}`` (newer Mistral templates) or a JSON list of calls.
        body = body.removeprefix("retrieve").strip()
        yield body
    yield stripped
    # The first JSON object or list embedded in prose.
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = stripped.find(opener), stripped.rfind(closer)
        if 0 <= start < end:
            yield stripped[start : end + 1]


def _clean(candidates: Iterator[str]) -> list[str]:
    seen: set[str] = set()
    queries: list[str] = []
    for raw in candidates:
        text = " ".join(raw.split()).strip(" \"'`")
        if not text or text.casefold().strip(".!") in _NOT_QUERIES or len(text.split()) > _MAX_QUERY_WORDS:
            continue
        if text.casefold() in seen:
            continue
        seen.add(text.casefold())
        queries.append(text[:MAX_QUERY_CHARS])
    return queries[:MAX_QUERIES]


def parse_queries(text: str) -> list[str]:
    """The search queries written in ``text`` (at most MAX_QUERIES; possibly none)."""
    if not text.strip():
        return []
    for candidate in _json_candidates(text):
        decoded = _loads(candidate)
        if isinstance(decoded, dict | list):
            # Structured output is taken at its word, even when it holds no query.
            return _clean(_strings(decoded))
    call = _CALL.search(text)
    if call:
        found = _clean(iter(_QUOTED.findall(call.group(1))))
        if found:
            return found
    lines = [line for line in text.splitlines() if line.strip()]
    bulleted = [_BULLET.sub("", line) for line in lines if _BULLET.match(line)]
    if bulleted:
        return _clean(iter(bulleted))
    # Prose around the queries ("Here are the queries:") ends with a colon: not a query.
    return _clean(line for line in lines if not line.rstrip().endswith(":"))
