"""What long-term memory costs a chat turn, and how well reconciliation keeps the memory right.

    python -m benchmarks.memory                 # a fresh `rag dev` with ENABLE_MEMORY=true, an instant model
    python -m benchmarks.memory --turns 40

The model is scripted and instant (a local OpenAI-compatible server in its own process), so the
numbers are the service's own cost; a real model adds its latency to the two background calls.

1. **Per-turn overhead.** One user first gets ``--seed-facts`` facts through the memory API. Then
   ``--turns`` chat turns (no knowledge base) that each state a new fact are sent with the user (memory
   on: recall on the request path, reconciliation in the background) and the same number without a
   user (memory skipped). Between turns the benchmark waits for the reconciliation (``GET …/facts``,
   timed separately), as a person's pause between messages would: the turn's own overhead is
   p50(with) - p50(without).
2. **Reconciliation accuracy.** A small set of cases of our own (contradiction, refinement, deletion,
   unrelated fact), each a user with a few facts (the one the message concerns among distractors) and
   one message. The model is an oracle: it states the intended candidate and, when the fact the
   message concerns is among the facts the service showed it, applies the intended operation to it;
   otherwise it ADDs (what a model does that never saw the old fact). So the score measures what the
   service contributes: whether the closest-fact retrieval shows the model the right fact, and whether
   the decision reaches the files and the index intact. A case passes when the user's facts afterwards
   are exactly the expected set.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.scripted_model import scripted_model
from benchmarks.stack import running_stack

EXTRACT_TOOL = "record_facts"
DECIDE_TOOL = "decide_memory_operations"


@dataclass(frozen=True)
class Case:
    kind: str
    facts: tuple[str, ...]
    message: str
    candidate: str
    target: str | None  # the existing fact the message concerns (None: unrelated)
    action: str  # what the oracle does to ``target``: UPDATE or DELETE (ADD when target is None)
    expected: tuple[str, ...]


_DISTRACTORS = (
    "The user lives in Bergen.",
    "The user works as a nurse at the city hospital.",
    "The user has a daughter called Ingrid.",
    "The user is allergic to peanuts.",
    "The user plays the violin in an amateur orchestra.",
    "The user drives an electric car.",
)


def _case(kind: str, target: str | None, message: str, candidate: str, action: str = "UPDATE") -> Case:
    facts = (*_DISTRACTORS, *([target] if target else []))
    # Unrelated: the candidate is added; a contradiction or refinement replaces the target; a deletion
    # only removes it.
    expected: tuple[str, ...] = (
        _DISTRACTORS if target is not None and action == "DELETE" else (*_DISTRACTORS, candidate)
    )
    return Case(kind, facts, message, candidate, target, action if target else "ADD", expected)


CASES: tuple[Case, ...] = (
    _case(
        "contradiction",
        "The user uses pip for Python packaging.",
        "Actually, I switched to poetry.",
        "The user uses poetry for Python packaging.",
    ),
    _case(
        "contradiction",
        "The user prefers tea in the morning.",
        "I've stopped drinking tea, coffee now.",
        "The user prefers coffee in the morning.",
    ),
    _case(
        "contradiction",
        "The user's favourite editor is Vim.",
        "These days I do everything in VS Code.",
        "The user's favourite editor is VS Code.",
    ),
    _case(
        "contradiction",
        "The user is vegetarian.",
        "I started eating fish again last month.",
        "The user is pescatarian and eats fish.",
    ),
    _case(
        "refinement",
        "The user has a dog.",
        "My dog is a border collie named Luna.",
        "The user has a border collie named Luna.",
    ),
    _case(
        "refinement",
        "The user is learning a foreign language.",
        "The language I'm learning is Japanese.",
        "The user is learning Japanese.",
    ),
    _case(
        "refinement",
        "The user runs regularly.",
        "I run 10 km every Sunday morning.",
        "The user runs 10 km every Sunday morning.",
    ),
    _case(
        "refinement",
        "The user is planning a trip.",
        "The trip is to Lisbon in May.",
        "The user is planning a trip to Lisbon in May.",
    ),
    _case(
        "deletion",
        "The user has a cat.",
        "Sadly our cat died last week, we have no pets now.",
        "The user no longer has a cat.",
        action="DELETE",
    ),
    _case(
        "deletion",
        "The user is training for a marathon.",
        "I gave up on the marathon training.",
        "The user stopped training for a marathon.",
        action="DELETE",
    ),
    _case(
        "unrelated",
        None,
        "I collect vinyl records from the seventies.",
        "The user collects vinyl records from the seventies.",
    ),
    _case("unrelated", None, "My birthday is on the 3rd of March.", "The user's birthday is on 3 March."),
    _case("unrelated", None, "I'm a big fan of chess puzzles.", "The user enjoys chess puzzles."),
    _case(
        "unrelated",
        None,
        "I speak Portuguese at home with my partner.",
        "The user speaks Portuguese at home with their partner.",
    ),
)
_BY_MESSAGE = {case.message: case for case in CASES}
_BY_CANDIDATE = {case.candidate: case for case in CASES}
_OVERHEAD = re.compile(r"Remember this: I collect item (\d+)\.")


def _completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }


def _tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"id": "call_0", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return _completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")


def _prompt(body: dict[str, Any]) -> str:
    users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users and isinstance(users[-1], str) else ""


def oracle_reply(body: dict[str, Any]) -> bytes:
    """The scripted model's answer as JSON bytes."""
    return json.dumps(_oracle(body)).encode()


def _oracle(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted model (module docstring)."""
    tools = {tool["function"]["name"] for tool in body.get("tools") or []}
    prompt = _prompt(body)
    if EXTRACT_TOOL in tools:
        newest = prompt.split("Newest message:\n", 1)[-1].strip()
        case = _BY_MESSAGE.get(newest)
        counted = _OVERHEAD.search(newest)
        facts = [case.candidate] if case else [f"The user collects item {counted.group(1)}."] if counted else []
        return _tool(EXTRACT_TOOL, {"facts": [{"text": fact, "language": "en"} for fact in facts]})
    if DECIDE_TOOL in tools:
        shown_part, _, new_part = prompt.partition("New candidate facts:\n")
        shown = {text: int(number) for number, text in re.findall(r"^(\d+)\. (.+)$", shown_part, re.MULTILINE)}
        operations = []
        for candidate in re.findall(r"^- (.+) \(language: [a-z]+\)$", new_part, re.MULTILINE):
            case = _BY_CANDIDATE.get(candidate)
            if case is not None and case.target is not None and case.target in shown:
                operation: dict[str, Any] = {"action": case.action, "fact": shown[case.target], "reason": case.kind}
                if case.action == "UPDATE":
                    operation["text"] = candidate
                operations.append(operation)
            else:
                operations.append({"action": "ADD", "text": candidate, "language": "en", "reason": "new"})
        return _tool(DECIDE_TOOL, {"operations": operations})
    return _completion({"role": "assistant", "content": "ok"}, "stop")


def _chat(client: httpx.Client, content: str, user: str | None) -> float:
    body: dict[str, Any] = {"model": "scripted", "messages": [{"role": "user", "content": content}]}
    if user is not None:
        body["user"] = user
    started = time.perf_counter()
    response = client.post("/v1/chat/completions", json=body)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed


def _facts(client: httpx.Client, user: str) -> list[str]:
    response = client.get(f"/api/v1/memory/{user}/facts")
    response.raise_for_status()
    return [fact["text"] for fact in response.json()["facts"]]


def _ms(values: Sequence[float], quantile: float = 0.5) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(quantile * len(ordered)))]


def overhead(client: httpx.Client, *, turns: int, seed_facts: int) -> None:
    for index in range(seed_facts):
        client.post("/api/v1/memory/bench/facts", json={"text": f"The user knows fact {index}.", "language": "en"})
    for index in range(3):  # warm-up: first calls load what they need
        _chat(client, f"Remember this: I collect item {10_000 + index}.", "warmup")
        _facts(client, "warmup")
        _chat(client, "Hello there.", None)
    with_memory: list[float] = []
    waits: list[float] = []
    without: list[float] = []
    for index in range(turns):
        with_memory.append(_chat(client, f"Remember this: I collect item {index}.", "bench"))
        started = time.perf_counter()
        _facts(client, "bench")
        waits.append(time.perf_counter() - started)
        without.append(_chat(client, f"Remember this: I collect item {index}.", None))
    print(f"facts stored at the end: {len(_facts(client, 'bench'))}")
    print("| chat turn (instant model, no knowledge base) | p50 ms | p95 ms |")
    print("|---|---|---|")
    print(f"| without a user (memory skipped) | {_ms(without):.1f} | {_ms(without, 0.95):.1f} |")
    print(f"| with a user (recall on the request path) | {_ms(with_memory):.1f} | {_ms(with_memory, 0.95):.1f} |")
    print(f"| **memory's overhead per turn (p50 difference)** | **{_ms(with_memory) - _ms(without):.1f}** | |")
    print(f"| background reconciliation, waited for after the turn | {_ms(waits):.1f} | {_ms(waits, 0.95):.1f} |")


def accuracy(client: httpx.Client) -> None:
    print("\n| kind | cases | right |")
    print("|---|---|---|")
    results: dict[str, list[bool]] = {}
    for number, case in enumerate(CASES):
        user = f"case-{number}"
        for fact in case.facts:
            client.post(f"/api/v1/memory/{user}/facts", json={"text": fact, "language": "en"}).raise_for_status()
        _chat(client, case.message, user)
        after = sorted(_facts(client, user))
        right = after == sorted(case.expected)
        results.setdefault(case.kind, []).append(right)
        if not right:
            print(f"<!-- miss ({case.kind}): {case.message!r} -> {after} -->")
    for kind, outcomes in results.items():
        print(f"| {kind} | {len(outcomes)} | {sum(outcomes)} |")
    total = [outcome for outcomes in results.values() for outcome in outcomes]
    print(f"| **all** | {len(total)} | **{sum(total)} ({sum(total) / len(total):.0%})** |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--seed-facts", type=int, default=50)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work, scripted_model(oracle_reply) as model_url:
        env = {
            "CHAT_UPSTREAM_BASE_URL": model_url,
            "CHAT_DEFAULT_MODEL": "scripted",
            "ENABLE_MEMORY": "true",
            "MEMORY_PATH": str(Path(work) / "memory"),
        }
        with running_stack(Path(work) / "qdrant", env) as stack:
            headers = {"Authorization": f"Bearer {stack.retrieval_key}"}
            with httpx.Client(base_url=stack.retrieval_url, headers=headers, timeout=120) as client:
                overhead(client, turns=args.turns, seed_facts=args.seed_facts)
                accuracy(client)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
