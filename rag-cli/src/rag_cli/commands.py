"""``rag ingest`` and ``rag search``: progress bar, readable tables, non-zero exit on failure."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rag_cli.client import IngestOutcome, SearchFailedError, SearchReply, ingest_file, ingest_url, search_reply
from rag_cli.config import Endpoint
from rag_cli.ignores import FolderFilter, IgnoreRules, UnreadableFolderError
from retrieval_agent.api.models import SearchResponse
from shared_contract.schema import MetaKey, page_number

INGEST_TIMEOUT = httpx.Timeout(900.0, connect=10.0)
_WEB_SCHEMES = ("http://", "https://")


def is_web_url(item: str | Path) -> bool:
    """Whether a ``rag ingest`` argument is a web page for the service to fetch, not a local path."""
    return isinstance(item, str) and item.lower().startswith(_WEB_SCHEMES)


@dataclass(frozen=True, slots=True)
class FoundFile:
    """A file to ingest, and its ``path`` relative to the folder named on the command line (a file
    named directly: its name)."""

    path: Path
    relative: str
    # Found by walking a folder: bytes that are no document are skipped there, not failed.
    in_folder: bool


def find_files(paths: Iterable[Path], rules: IgnoreRules | None = None) -> list[FoundFile]:
    """Files named directly, plus the files under named folders that the ignore rules keep
    (``rag_cli.ignores``), each folder's sorted."""
    found: list[FoundFile] = []
    for path in paths:
        if path.is_dir():
            relatives = sorted(FolderFilter(path, rules).files())
            found.extend(FoundFile(path / relative, relative, in_folder=True) for relative in relatives)
        elif path.is_file():
            found.append(FoundFile(path, path.name, in_folder=False))
        else:
            raise FileNotFoundError(str(path))
    return found


def collect_files(paths: Iterable[Path], rules: IgnoreRules | None = None) -> list[Path]:
    """The files :func:`find_files` finds."""
    return [found.path for found in find_files(paths, rules)]


def collect_sources(items: Iterable[str | Path], rules: IgnoreRules | None = None) -> list[FoundFile | str]:
    """http(s) URLs as given, then every file :func:`find_files` finds under the other arguments."""
    urls: list[FoundFile | str] = [item for item in items if isinstance(item, str) and is_web_url(item)]
    files = find_files((Path(item) for item in items if not is_web_url(item)), rules)
    return [*urls, *files]


async def ingest_many(
    endpoint: Endpoint,
    files: Sequence[FoundFile | str],
    *,
    collection: str,
    user_id: str,
    concurrency: int,
    console: Console,
    transport: httpx.AsyncBaseTransport | None = None,
) -> list[IngestOutcome]:
    """Ingest ``files`` (paths, or URLs the service fetches) with at most ``concurrency`` requests in
    flight, showing a progress bar."""
    gate = asyncio.Semaphore(concurrency)
    outcomes: list[IngestOutcome | None] = [None] * len(files)
    progress = Progress(
        TextColumn("[bold]ingest"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=False,
    )
    async with httpx.AsyncClient(timeout=INGEST_TIMEOUT, transport=transport) as client:
        with progress:
            task = progress.add_task("", total=len(files))

            async def one(index: int, item: FoundFile | str) -> None:
                async with gate:
                    if isinstance(item, str):
                        outcome = await ingest_url(client, endpoint, item, collection=collection, user_id=user_id)
                    else:
                        outcome = await ingest_file(
                            client,
                            endpoint,
                            item.path,
                            collection=collection,
                            user_id=user_id,
                            relative_path=item.relative,
                            skip_junk=item.in_folder,
                        )
                outcomes[index] = outcome
                progress.update(task, advance=1, description=escape(item if isinstance(item, str) else item.relative))

            await asyncio.gather(*(one(index, path) for index, path in enumerate(files)))
    return [outcome for outcome in outcomes if outcome is not None]


def ingest_table(outcomes: Sequence[IngestOutcome]) -> Table:
    """One row per file, then a total (paths and errors are shown as written, never as markup)."""
    table = Table(title="Ingest summary")
    table.add_column("file")
    table.add_column("status")
    table.add_column("chunks", justify="right")
    table.add_column("error", overflow="fold")
    for outcome in outcomes:
        status = "[green]ok[/green]" if outcome.ok else "[red]failed[/red]"
        table.add_row(
            escape(str(outcome.path)),
            "[yellow]skipped[/yellow]" if outcome.skipped else status,
            "" if outcome.chunks is None else str(outcome.chunks),
            escape(outcome.error or ""),
        )
    ok = sum(outcome.ok for outcome in outcomes)
    skipped = sum(outcome.skipped for outcome in outcomes)
    chunks = sum(outcome.chunks or 0 for outcome in outcomes)
    table.caption = f"{ok}/{len(outcomes) - skipped} files ok, {chunks} chunks" + (
        f", {skipped} skipped (not a document)" if skipped else ""
    )
    return table


def run_ingest(
    endpoint: Endpoint,
    paths: Sequence[Path | str],
    *,
    collection: str,
    user_id: str,
    concurrency: int,
    rules: IgnoreRules | None = None,
    console: Console | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> int:
    """Entry point of ``rag ingest``: 0 when every file (and web page) was ingested or, found in a
    folder, skipped as no document; else 1."""
    console = console or Console()
    try:
        files = collect_sources(paths, rules)
    except FileNotFoundError as exc:
        console.print(f"[red]no such file or folder: {escape(str(exc))}[/red]")
        return 2
    except UnreadableFolderError as exc:
        console.print(f"[red]{escape(str(exc))}[/red]")
        return 1
    if not files:
        console.print("[yellow]no files to ingest[/yellow]")
        return 1
    try:
        outcomes = asyncio.run(
            ingest_many(
                endpoint,
                files,
                collection=collection,
                user_id=user_id,
                concurrency=concurrency,
                console=console,
                transport=transport,
            )
        )
    except KeyboardInterrupt:
        console.print("[yellow]rag ingest: interrupted (files sent before stay ingested; run it again)[/yellow]")
        return 130
    console.print(ingest_table(outcomes))
    return 0 if all(outcome.ok or outcome.skipped for outcome in outcomes) else 1


def _snippet(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def results_table(query: str, results: SearchResponse) -> Table:
    """Rank, score, source, page and a snippet per hit of the first result set (text shown as written)."""
    table = Table(title=f"Results for {escape(repr(query))}")
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("source")
    table.add_column("page", justify="right")
    table.add_column("snippet", overflow="fold")
    first_docs = results.documents[0] if results.documents else []
    first_meta = results.metadatas[0] if results.metadatas else []
    first_scores = results.distances[0] if results.distances else []
    for rank, text in enumerate(first_docs, start=1):
        meta = first_meta[rank - 1] if rank - 1 < len(first_meta) else {}
        score = first_scores[rank - 1] if rank - 1 < len(first_scores) else None
        # A synced file by its path under the synced folder (notes/2024/plan.md), else by its name.
        source = str(meta.get(MetaKey.PATH) or meta.get("name") or meta.get("source") or "")
        page = page_number(meta.get("page"))  # the stored page is 0-based; people count from 1
        table.add_row(
            str(rank),
            "" if score is None else f"{score:.4f}",
            escape(source),
            "" if page is None else escape(str(page)),
            escape(_snippet(text)),
        )
    return table


def _step_detail(step: dict[str, Any]) -> str:
    """The arguments and findings of one agent step, as one line."""
    skip = {"tool", "results", "ms"}
    parts = []
    for key, value in step.items():
        if key in skip:
            continue
        parts.append(f"{key}={json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value}")
    return " ".join(parts)


def steps_table(reply: SearchReply) -> Table:
    """One row per step the agent took (tool, arguments, results, time)."""
    table = Table(title=f"Agent steps (outcome: {escape(str(reply.agent_outcome))})")
    table.add_column("#", justify="right")
    table.add_column("tool")
    table.add_column("arguments", overflow="fold")
    table.add_column("results", justify="right")
    table.add_column("ms", justify="right")
    for index, step in enumerate(reply.agent_steps or [], start=1):
        table.add_row(
            str(index),
            escape(str(step.get("tool", ""))),
            escape(_step_detail(step)),
            escape(str(step.get("results", ""))),
            escape(str(step.get("ms", ""))),
        )
    if reply.agent_fallback:
        table.caption = f"the linear pipeline answered instead: {escape(reply.agent_fallback)}"
    return table


def run_search(
    endpoint: Endpoint,
    query: str,
    *,
    collections: list[str],
    k: int,
    as_json: bool = False,
    agentic: bool = False,
    console: Console | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> int:
    """Entry point of ``rag search``: 0 on success (even with no hits), 1 on an error.

    ``agentic``: also show the steps the agent took (the service must run with ENABLE_AGENTIC_RAG=true).
    """
    console = console or Console()

    async def call() -> SearchReply:
        async with httpx.AsyncClient(timeout=120.0 if agentic else 60.0, transport=transport) as client:
            return await search_reply(client, endpoint, query, collections=collections, k=k, agent_steps=agentic)

    try:
        reply = asyncio.run(call())
        if as_json:
            payload: dict[str, Any] = reply.body
            if agentic:
                payload = {
                    "agent": {
                        "outcome": reply.agent_outcome,
                        "fallback": reply.agent_fallback,
                        "steps": reply.agent_steps,
                    },
                    "response": reply.body,
                }
            console.print_json(json.dumps(payload))
            return 0
        if agentic and reply.agent_outcome is None:
            console.print("[yellow]the service ran the linear pipeline (ENABLE_AGENTIC_RAG is off there)[/yellow]")
        elif agentic:
            console.print(steps_table(reply))
        console.print(results_table(query, reply.results))
    except (SearchFailedError, httpx.HTTPError) as exc:
        console.print(f"[red]search failed: {escape(str(exc))}[/red]")
        return 1
    return 0
