"""Real-document retrieval benchmark: hit@1, hit@5, MRR@10 through the real HTTP APIs.

    python -m benchmarks.realdocs                          # rows hybrid, dense, sparse + plain BM25
    python -m benchmarks.realdocs --configs hybrid         # the default retrieval settings only
    python -m benchmarks.realdocs --limit-questions 10     # smoke
    python -m benchmarks.realdocs --questions tune         # the context set's tuning split (test: held out)

Every file under ../shared/eval/docs (not MANIFEST.md, manifest.json, SHA256SUMS, expected/) is
ingested once into the tenant `bench-realdocs` of its own embedded store (benchmarks/.work/realdocs/),
resumably; files the service rejects are listed and skipped. Each config row restarts `rag dev` on
that store with the row's retrieval settings (see benchmarks/configs.py) plus ENABLE_INSPECTION_API,
and asks every question of the chosen question files (default benchmarks/realdocs/questions.jsonl)
through POST /search (k 10). The baseline row ranks the same stored chunks, read back through the
inspection API, with a plain Okapi BM25. Each row is scored by the passage rule (the chunk's own
text holds the answer) and the document rule (the right source). Per-question ranks and a summary
go to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from benchmarks.client import BenchmarkHTTPError, ServiceClient
from benchmarks.configs import add_set_option, parse_set_option
from benchmarks.ingest import read_done
from benchmarks.quality import RESULTS_DIR, WORK_DIR, config_env, machine, workspace
from benchmarks.realdocs import (
    BM25,
    COLLECTION,
    DEFAULT_DOCS_DIR,
    SEARCH_K,
    Question,
    Scores,
    breakdown_table,
    contains_answer,
    doc_file_id,
    doc_paths,
    file_id_map,
    first_hit_rank,
    first_source_rank,
    load_question_sets,
    markdown_table,
    question_paths,
    score_ranks,
    scores_by,
)
from benchmarks.stack import Stack, StackError, attached_stack, running_stack

DATASET = "realdocs"
DEFAULT_CONFIGS = ["hybrid", "dense", "sparse"]
ATTACHED_ROW = "attached"
BM25_ROW = "bm25 (plain, same chunks)"
INSPECTION_ENV = {"ENABLE_INSPECTION_API": "true"}
PAGE_LIMIT = 1000


class InspectionUnavailableError(RuntimeError):
    """GET /api/v1/documents/{id}/chunks answered 404: ENABLE_INSPECTION_API is off on that stack."""


# --- ingestion ---------------------------------------------------------------------------------


@dataclass
class IngestReport:
    ingested: int = 0
    chunks: int = 0
    already_done: int = 0
    seconds: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ingested_now": self.ingested,
            "chunks_now": self.chunks,
            "already_done": self.already_done,
            "seconds": round(self.seconds, 2),
            "failures": self.failures,
        }


def _client(stack: Stack) -> ServiceClient:
    return ServiceClient(stack.ingestion_url, stack.retrieval_url, stack.ingestion_key, stack.retrieval_key)


async def ingest_files(
    stack: Stack, docs_dir: Path, rel_paths: Sequence[str], done_path: Path, concurrency: int
) -> IngestReport:
    """Upload every document not yet in the done-list; failures are recorded, not fatal."""
    done = read_done(done_path)
    todo = [rel for rel in rel_paths if doc_file_id(rel) not in done]
    report = IngestReport(already_done=len(rel_paths) - len(todo))
    if not todo:
        return report
    done_path.parent.mkdir(parents=True, exist_ok=True)
    queue: asyncio.Queue[str] = asyncio.Queue()
    for rel in todo:
        queue.put_nowait(rel)
    finished = 0
    started = time.perf_counter()
    with done_path.open("a", encoding="utf-8") as done_file:
        async with _client(stack) as client:

            async def worker() -> None:
                nonlocal finished
                while True:
                    try:
                        rel = queue.get_nowait()
                    except asyncio.QueueEmpty:
                        return
                    file_id = doc_file_id(rel)
                    try:
                        result = await client.ingest(
                            file_id=file_id,
                            filename=Path(rel).name,
                            content=(docs_dir / rel).read_bytes(),
                            collection_name=COLLECTION,
                        )
                    except (BenchmarkHTTPError, httpx.HTTPError) as exc:
                        status = exc.status if isinstance(exc, BenchmarkHTTPError) else None
                        body = exc.body if isinstance(exc, BenchmarkHTTPError) else f"{type(exc).__name__}: {exc}"
                        report.failures.append({"path": rel, "file_id": file_id, "status": status, "error": body[:400]})
                        finished += 1
                        print(f"  [{finished}/{len(todo)}] {rel}: FAILED ({status}) {body[:160]}", flush=True)
                        continue
                    report.ingested += 1
                    report.chunks += result.chunks
                    done_file.write(f"{file_id}\t{result.chunks}\n")
                    done_file.flush()
                    finished += 1
                    print(
                        f"  [{finished}/{len(todo)}] {rel}: {result.chunks} chunks ({result.seconds:.1f}s)", flush=True
                    )

            await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    report.seconds = time.perf_counter() - started
    report.failures.sort(key=lambda failure: str(failure["path"]))
    return report


# --- stored chunks (inspection API) ------------------------------------------------------------


@dataclass(frozen=True)
class StoredChunk:
    file_id: str
    text: str


async def stored_chunks(http: httpx.AsyncClient, file_id: str) -> list[dict[str, Any]]:
    """One file's stored chunks as the inspection API lists them ({content, meta, ...}), in split id order.

    ``http`` is a client on the ingestion service with its key.
    """
    chunks: list[dict[str, Any]] = []
    offset: str | None = None
    while True:
        params: dict[str, str | int] = {"include_content": "full", "limit": PAGE_LIMIT, "collection_name": COLLECTION}
        if offset:
            params["offset"] = offset
        response = await http.get(f"/api/v1/documents/{quote(file_id, safe='')}/chunks", params=params)
        if response.status_code == 404:
            raise InspectionUnavailableError(
                "the inspection API answered 404; start the stack with ENABLE_INSPECTION_API=true"
            )
        if response.status_code != 200:
            raise BenchmarkHTTPError(f"chunks of {file_id}", response.status_code, response.text)
        body = response.json()
        chunks.extend(body["chunks"])
        offset = body.get("next_offset")
        if not offset:
            return chunks


async def fetch_chunks(
    stack: Stack, file_ids: Sequence[str], *, transport: httpx.AsyncBaseTransport | None = None
) -> list[StoredChunk]:
    """Every stored chunk of the files, in file order then the API's (split id) order."""
    chunks: list[StoredChunk] = []
    async with httpx.AsyncClient(
        base_url=stack.ingestion_url,
        headers={"Authorization": f"Bearer {stack.ingestion_key}"},
        timeout=120.0,
        transport=transport,
    ) as http:
        for file_id in file_ids:
            stored = await stored_chunks(http, file_id)
            chunks.extend(StoredChunk(file_id, str(chunk.get("content") or "")) for chunk in stored)
    return chunks


# --- rows --------------------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    env: dict[str, str] | None = None
    skipped: str | None = None
    ranks: dict[str, int | None] = field(default_factory=dict)  # passage rule
    doc_ranks: dict[str, int | None] = field(default_factory=dict)  # document rule
    top5: dict[str, list[str]] = field(default_factory=dict)
    wall_s: float = 0.0

    def scores(self) -> Scores:
        return score_ranks(list(self.ranks.values()))

    def doc_scores(self) -> Scores:
        return score_ranks(list(self.doc_ranks.values()))


def rank_row(
    row: Row, questions: Sequence[Question], ranked: dict[str, list[tuple[str, str]]], id_to_path: dict[str, str]
) -> Row:
    """Fill a row's ranks and top-5 file names from each question's ranked (file id, text) list."""
    for question in questions:
        hits = ranked.get(question.id, [])
        row.ranks[question.id] = first_hit_rank(hits, question, id_to_path, SEARCH_K)
        row.doc_ranks[question.id] = first_source_rank(hits, question, id_to_path, SEARCH_K)
        row.top5[question.id] = [id_to_path.get(file_id, file_id) for file_id, _ in hits[:5]]
    return row


async def search_all(stack: Stack, questions: Sequence[Question], concurrency: int) -> dict[str, list[tuple[str, str]]]:
    semaphore = asyncio.Semaphore(max(1, concurrency))
    ranked: dict[str, list[tuple[str, str]]] = {}
    async with _client(stack) as client:

        async def one(question: Question) -> None:
            async with semaphore:
                result = await client.search(question.question, [COLLECTION], SEARCH_K)
            ranked[question.id] = [(hit.file_id, hit.text) for hit in result.hits]

        await asyncio.gather(*(one(question) for question in questions))
    return ranked


def bm25_ranked(chunks: Sequence[StoredChunk], questions: Sequence[Question]) -> dict[str, list[tuple[str, str]]]:
    index = BM25([chunk.text for chunk in chunks])
    return {
        question.id: [(chunks[i].file_id, chunks[i].text) for i, _ in index.search(question.question, SEARCH_K)]
        for question in questions
    }


def answerable(
    questions: Sequence[Question], chunks: Sequence[StoredChunk], id_to_path: dict[str, str]
) -> dict[str, bool]:
    """Whether any stored chunk of a question's source(s) holds its answer (the ceiling of every row)."""
    by_path: dict[str, list[str]] = {}
    for chunk in chunks:
        by_path.setdefault(id_to_path.get(chunk.file_id, ""), []).append(chunk.text)
    return {
        question.id: any(
            contains_answer(text, question.answer) for source in question.sources for text in by_path.get(source, [])
        )
        for question in questions
    }


# --- output ------------------------------------------------------------------------------------


def write_per_question(
    path: Path, questions: Sequence[Question], rows: Sequence[Row], in_index: dict[str, bool] | None
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    live = [row for row in rows if row.skipped is None]
    with path.open("w", encoding="utf-8") as fh:
        for question in questions:
            record = {
                "id": question.id,
                "kind": question.kind,
                "format": question.format,
                "source": question.source,
                "question": question.question,
                "answer": question.answer,
                "answer_in_index": None if in_index is None else in_index.get(question.id),
                "rank": {row.name: row.ranks.get(question.id) for row in live},
                "doc_rank": {row.name: row.doc_ranks.get(question.id) for row in live},
                "top5": {row.name: row.top5.get(question.id, []) for row in live},
            }
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")


def report_text(
    questions: Sequence[Question],
    rows: Sequence[Row],
    ingest: IngestReport | None,
    in_index: dict[str, bool] | None,
) -> str:
    live = [row for row in rows if row.skipped is None]
    parts = [markdown_table({row.name: row.scores() for row in live}, {row.name: row.doc_scores() for row in live})]
    for row in rows:
        if row.skipped is not None:
            parts.append(f"- row {row.name!r} skipped: {row.skipped}")
    if live:
        for label in ("kind", "format"):
            parts.append(
                breakdown_table(
                    label,
                    {row.name: scores_by(questions, row.ranks, label) for row in live},
                    {row.name: scores_by(questions, row.doc_ranks, label) for row in live},
                )
            )
    if in_index is not None:
        missing = sorted(qid for qid, ok in in_index.items() if not ok)
        parts.append(
            f"answer present in a stored chunk of its source for {len(in_index) - len(missing)}/{len(in_index)} "
            f"questions (the ceiling of every row)" + (f"; not found: {', '.join(missing)}" if missing else "")
        )
    if ingest is not None and ingest.failures:
        lines = [f"ingest failures ({len(ingest.failures)} files, skipped):"]
        lines += [f"  {f['path']}: HTTP {f['status']}: {str(f['error'])[:200]}" for f in ingest.failures]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


# --- main --------------------------------------------------------------------------------------


def row_env(config: str, args: argparse.Namespace) -> dict[str, str] | str:
    env = config_env(config, args.tuned_on, args.rerank_url)
    if isinstance(env, str):
        return env
    return {**env, **args.set, **INSPECTION_ENV}


def run(args: argparse.Namespace) -> tuple[list[Question], list[Row], IngestReport | None, dict[str, bool] | None]:
    questions = load_question_sets(question_paths(args.questions))
    if args.limit_questions is not None:
        questions = questions[: args.limit_questions]
    if not args.docs_dir.is_dir():
        raise SystemExit(f"no documents at {args.docs_dir} (pass --docs-dir)")
    rel_paths = doc_paths(args.docs_dir)
    id_to_path = file_id_map(rel_paths)
    unknown = [q.id for q in questions if not q.sources & set(rel_paths)]
    if unknown:
        print(f"warning: {len(unknown)} questions name a source not under {args.docs_dir}: {unknown}", file=sys.stderr)
    ws = workspace(DATASET, args.work_dir)
    attached = attached_stack() is not None
    configs = [ATTACHED_ROW] if attached else args.configs
    if attached:
        print("attached to BENCH_*_URL: one row with that stack's own settings (--configs ignored)", flush=True)
    print(f"realdocs: {len(rel_paths)} documents, {len(questions)} questions, store {ws.qdrant}", flush=True)

    rows: list[Row] = []
    ingest: IngestReport | None = None
    chunks: list[StoredChunk] | None = None
    chunk_error: str | None = None
    for config in configs:
        env: dict[str, str] | None = None
        if not attached:
            wanted = row_env(config, args)
            if isinstance(wanted, str):
                print(f"  {config}: skipped: {wanted}", flush=True)
                rows.append(Row(config, skipped=wanted))
                continue
            env = wanted
        with running_stack(ws.qdrant, env, log_path=ws.log) as stack:
            if ingest is None:
                ingest = asyncio.run(ingest_files(stack, args.docs_dir, rel_paths, ws.done, args.ingest_concurrency))
                done = read_done(ws.done)
                if not any(doc_file_id(rel) in done for rel in rel_paths):
                    raise SystemExit(f"no document could be ingested; see {ws.log}")
            if chunks is None and chunk_error is None and not (args.no_bm25 and args.no_ceiling):
                done = read_done(ws.done)
                try:
                    chunks = asyncio.run(
                        fetch_chunks(stack, [doc_file_id(r) for r in rel_paths if doc_file_id(r) in done])
                    )
                except InspectionUnavailableError as exc:
                    chunk_error = str(exc)
            started = time.perf_counter()
            ranked = asyncio.run(search_all(stack, questions, args.search_concurrency))
            row = rank_row(Row(config, env=env), questions, ranked, id_to_path)
            row.wall_s = time.perf_counter() - started
            rows.append(row)
            s = row.scores()
            print(
                f"  {config}: hit@1 {s.hit_1:.3f}  hit@5 {s.hit_5:.3f}  MRR@10 {s.mrr_10:.3f}  ({s.n} questions, {row.wall_s:.0f}s)",
                flush=True,
            )
    if not args.no_bm25:
        if chunks is None:
            rows.append(Row(BM25_ROW, skipped=chunk_error or "no stack row ran, so no chunks were read"))
        else:
            started = time.perf_counter()
            row = rank_row(Row(BM25_ROW), questions, bm25_ranked(chunks, questions), id_to_path)
            row.wall_s = time.perf_counter() - started
            rows.append(row)
    in_index = None if chunks is None or args.no_ceiling else answerable(questions, chunks, id_to_path)
    return questions, rows, ingest, in_index


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.realdocs", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--configs",
        default=",".join(DEFAULT_CONFIGS),
        help="comma list of retrieval rows from benchmarks/configs.py (dense, sparse, rrf60, hybrid = the "
        "service defaults), tuned, rerank (default: %(default)s)",
    )
    parser.add_argument("--no-bm25", action="store_true", help="leave out the plain BM25 baseline row")
    parser.add_argument("--no-ceiling", action="store_true", help="skip the answer-in-index check")
    parser.add_argument("--tuned-on", default="scifact", help="whose tuned fusion the 'tuned' row uses")
    parser.add_argument("--rerank-url", default=None, help="a real /v1/rerank endpoint for the rerank row")
    parser.add_argument("--limit-questions", type=int, default=None, help="smoke: only the first N questions")
    parser.add_argument("--ingest-concurrency", type=int, default=2)
    parser.add_argument("--search-concurrency", type=int, default=2)
    parser.add_argument(
        "--questions",
        default="original",
        help="comma list of question files, or the named sets original, tune and test (the context "
        "set's splits; never tune on test) (default: %(default)s)",
    )
    parser.add_argument("--docs-dir", type=Path, default=DEFAULT_DOCS_DIR)
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    add_set_option(parser)
    args = parser.parse_args(argv)
    args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    args.questions = [q.strip() for q in args.questions.split(",") if q.strip()]
    args.set = parse_set_option(parser, args.set)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    started = time.perf_counter()
    try:
        questions, rows, ingest, in_index = run(args)
    except StackError as exc:
        print(f"the stack did not start: {exc}", file=sys.stderr)
        return 2
    per_question = args.results_dir / f"{stamp}-realdocs-questions.jsonl"
    write_per_question(per_question, questions, rows, in_index)
    summary = {
        "command": "python -m benchmarks.realdocs " + shlex.join(sys.argv[1:] if argv is None else list(argv)),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "wall_s": round(time.perf_counter() - started, 1),
        "docs_dir": str(args.docs_dir),
        "collection": COLLECTION,
        "questions": len(questions),
        "question_files": [str(path) for path in question_paths(args.questions)],
        "rows": [
            {"row": row.name, "env": row.env, "skipped": row.skipped}
            if row.skipped is not None
            else {
                "row": row.name,
                "env": row.env,
                **row.scores().as_dict(),
                "document": row.doc_scores().as_dict(),
                "wall_s": round(row.wall_s, 2),
                **{
                    f"by_{label}": {
                        key: {"hit@1": s.hit_1, "hit@5": s.hit_5, "n": s.n}
                        for key, s in scores_by(questions, row.ranks, label).items()
                    }
                    for label in ("kind", "format")
                },
            }
            for row in rows
        ],
        "answer_in_index": None if in_index is None else sum(in_index.values()),
        "answer_not_in_index": None if in_index is None else sorted(q for q, ok in in_index.items() if not ok),
        "ingest": None if ingest is None else ingest.as_dict(),
        "per_question_file": str(per_question),
    }
    out = args.results_dir / f"{stamp}-realdocs-summary.json"
    out.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print()
    print(report_text(questions, rows, ingest, in_index))
    print(f"\nper question: {per_question}\nsummary: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
