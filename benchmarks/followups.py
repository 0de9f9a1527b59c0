"""Follow-up questions without an LLM: does searching them with the previous user turn help?

    python -m benchmarks.followups                       # FOLLOWUP_CONTEXT off, combined, both
    python -m benchmarks.followups --modes off,combined

The multi-turn set `benchmarks/realdocs/followups.jsonl` (written for this benchmark) holds
two-turn chats over the real documents of `python -m benchmarks.realdocs` (run that first: it
ingests them into benchmarks/.work/realdocs):

- ``follow_up`` (32): a question from questions.jsonl, then a follow-up about the same document
  that leans on it ("Which symptoms should it report?"); the follow-up's answer is another
  question's answer in that document.
- ``topic_switch`` (81): a question about one document, then a self-contained question about
  another (every question of questions.jsonl once): context must not hurt these.

Each chat goes to POST /search as Open WebUI's bypass mode sends it (``queries`` = the last user
message, ``messages`` = the chat, no LLM configured); hits are scored with the realdocs hit rule.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.client import ServiceClient, search_chat
from benchmarks.quality import RESULTS_DIR, WORK_DIR, machine, workspace
from benchmarks.realdocs import (
    COLLECTION,
    DEFAULT_DOCS_DIR,
    PACKAGE_DIR,
    SEARCH_K,
    Question,
    Scores,
    doc_paths,
    file_id_map,
    first_hit_rank,
    score_ranks,
)
from benchmarks.stack import Stack, running_stack

CHATS_PATH = PACKAGE_DIR / "followups.jsonl"
MODES = ("off", "combined", "both")
ASSISTANT_TURN = "Here is what the documents say."


@dataclass(frozen=True, slots=True)
class Chat:
    id: str
    kind: str
    turns: tuple[str, ...]
    question: Question  # the last turn, with the answer and source that make a hit


def load_chats(path: Path = CHATS_PATH) -> list[Chat]:
    chats: list[Chat] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row: dict[str, Any] = json.loads(line)
        turns = tuple(str(turn) for turn in row["turns"])
        if len(turns) < 2 or row["kind"] not in {"follow_up", "topic_switch"}:
            raise ValueError(f"{path}:{number}: a chat needs 2+ turns and a known kind")
        source = str(row["source"])
        question = Question(
            id=str(row["id"]),
            question=turns[-1],
            answer=str(row["answer"]),
            source=source,
            kind="factoid",
            format=Path(source).parts[0],
            alt_sources=tuple(row.get("alt_sources", ())),
        )
        chats.append(Chat(id=question.id, kind=str(row["kind"]), turns=turns, question=question))
    return chats


def messages_of(chat: Chat) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    for turn in chat.turns:
        if messages:
            messages.append({"role": "assistant", "content": ASSISTANT_TURN})
        messages.append({"role": "user", "content": turn})
    return messages


async def ask_all(stack: Stack, chats: Sequence[Chat]) -> dict[str, list[tuple[str, str]]]:
    ranked: dict[str, list[tuple[str, str]]] = {}
    async with ServiceClient(
        stack.ingestion_url, stack.retrieval_url, stack.ingestion_key, stack.retrieval_key
    ) as client:
        for chat in chats:
            result = await search_chat(client, messages_of(chat), [COLLECTION], SEARCH_K)
            ranked[chat.id] = [(hit.file_id, hit.text) for hit in result.hits]
    return ranked


def scores_by_kind(chats: Sequence[Chat], ranks: dict[str, int | None]) -> dict[str, Scores]:
    kinds = sorted({chat.kind for chat in chats})
    return {kind: score_ranks([ranks[chat.id] for chat in chats if chat.kind == kind]) for kind in kinds}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.followups", description=__doc__)
    parser.add_argument("--modes", default=",".join(MODES), help="FOLLOWUP_CONTEXT values to compare")
    parser.add_argument("--docs-dir", type=Path, default=DEFAULT_DOCS_DIR)
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR)
    args = parser.parse_args(argv)
    chats = load_chats()
    space = workspace("realdocs", args.work_dir)
    if not space.qdrant.exists():
        raise SystemExit(f"{space.qdrant} is missing: run `python -m benchmarks.realdocs --configs hybrid` first")
    id_to_path = file_id_map(doc_paths(args.docs_dir))
    rows: dict[str, dict[str, Any]] = {}
    for mode in [name for name in args.modes.split(",") if name]:
        env = {"ENABLE_RERANKING": "false", "ENABLE_HYBRID_SEARCH": "true", "FOLLOWUP_CONTEXT": mode}
        with running_stack(space.qdrant, env, log_path=space.log) as stack:
            ranked = asyncio.run(ask_all(stack, chats))
        ranks = {chat.id: first_hit_rank(ranked[chat.id], chat.question, id_to_path, SEARCH_K) for chat in chats}
        by_kind = scores_by_kind(chats, ranks)
        rows[mode] = {"scores": {kind: s.as_dict() for kind, s in by_kind.items()}, "ranks": ranks}
        for kind, s in by_kind.items():
            print(f"{mode:9} {kind:13} n {s.n:3}  hit@1 {s.hit_1:.3f}  hit@5 {s.hit_5:.3f}  MRR@10 {s.mrr_10:.3f}")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"{stamp}-followups-summary.json"
    out.write_text(
        json.dumps({"machine": machine(), "chats": len(chats), "rows": rows}, indent=2) + "\n", encoding="utf-8"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
