"""``rag``: dev | ingest | sync | search | mcp | memory | open-webui | migrate | optimize."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rag_cli.config import UsageError, env_port, ingestion_endpoint, open_webui_endpoint, retrieval_endpoint

if TYPE_CHECKING:
    from rag_runtime.http import LogFormat

# The watcher polls at the quiet period's pace: below this it would spin.
MIN_DEBOUNCE_MS = 50


# What both services' settings accept (LOG_LEVEL), in uvicorn's spelling.
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def parser() -> argparse.ArgumentParser:
    """The command line."""
    root = argparse.ArgumentParser(
        prog="rag", description="Local RAG stack: run it, ingest or sync files, search, edit memory."
    )
    commands = root.add_subparsers(dest="command", required=True)

    dev = commands.add_parser("dev", help="run ingestion and retrieval in one process on an embedded Qdrant")
    dev.add_argument(
        "--host", default=os.environ.get("RAG_DEV_HOST", "127.0.0.1"), help="default: RAG_DEV_HOST or %(default)s"
    )
    # The port variables are read when `rag dev` runs: a malformed one must not break the parser.
    dev.add_argument("--ingestion-port", type=int, default=None, help="default: RAG_INGESTION_PORT or 8001")
    dev.add_argument("--retrieval-port", type=int, default=None, help="default: RAG_RETRIEVAL_PORT or 8002")
    dev.add_argument(
        "--qdrant-path", type=Path, default=None, help="embedded store (default: QDRANT_PATH or .data/qdrant)"
    )
    dev.add_argument("--ready-timeout", type=float, default=600.0, help="seconds to wait for both /health/ready")
    dev.add_argument("--log-level", type=str.lower, choices=LOG_LEVELS, default=None, help="default: LOG_LEVEL or info")

    migrate = commands.add_parser(
        "migrate",
        help="copy an embedded store from the old local-mode format into the embedded engine, or a contract 2 "
        "store into a contract 3 collection (stop rag dev first)",
    )
    migrate.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=None,
        help="the store directory (default: QDRANT_PATH or .data/qdrant); the old files are kept in it",
    )

    optimize = commands.add_parser(
        "optimize", help="build the embedded engine's HNSW graphs (maintenance: blocks for seconds; stop rag dev first)"
    )
    optimize.add_argument("--path", dest="source", type=Path, default=None, help="default: QDRANT_PATH or .data/qdrant")

    ingest = commands.add_parser("ingest", help="ingest files, folders or web pages")
    # Strings, not Paths: a Path would fold the "//" of an http(s) URL.
    ingest.add_argument(
        "paths", nargs="+", metavar="PATH_OR_URL", help="a file, a folder, or an http(s) URL the service fetches"
    )
    ingest.add_argument("--collection", required=True, help="tenant (Open WebUI collection name)")
    ingest.add_argument("--user-id", default="rag-cli")
    ingest.add_argument("--concurrency", type=int, default=2)
    _ignore_flags(ingest)
    ingest.add_argument("--url", default=None, help="ingestion base URL (RAG_INGESTION_URL)")
    ingest.add_argument("--api-key", default=None, help="ingestion key (INGESTION_API_KEY)")

    sync = commands.add_parser(
        "sync",
        help="keep a folder or an s3:// prefix in step with a knowledge base",
        description="Ingest new files, re-ingest changed ones, delete the chunks of removed ones; "
        "unchanged files are skipped by content hash (S3: by ETag) without being uploaded.",
    )
    sync.add_argument("source", metavar="PATH|s3://bucket/prefix")
    sync.add_argument("--collection", required=True, help="tenant (Open WebUI collection name)")
    sync.add_argument("--user-id", default="rag-cli")
    sync.add_argument("--concurrency", type=int, default=2)
    sync.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    sync.add_argument("--force", action="store_true", help="re-extract and re-embed every file (the API's force=true)")
    sync.add_argument("--watch", action="store_true", help="keep following changes until Ctrl-C")
    sync.add_argument(
        "--debounce-ms", type=int, default=1500, help="--watch on a folder: sync once it has been quiet this long"
    )
    sync.add_argument("--interval", type=float, default=60.0, help="--watch on s3://: seconds between listings")
    sync.add_argument(
        "--s3-endpoint-url",
        default=None,
        help="S3/MinIO endpoint to list (else AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, S3_ENDPOINT_URL)",
    )
    _ignore_flags(sync)
    sync.add_argument("--url", default=None, help="ingestion base URL (RAG_INGESTION_URL)")
    sync.add_argument("--api-key", default=None, help="ingestion key (INGESTION_API_KEY)")

    search = commands.add_parser("search", help="search one or more collections")
    search.add_argument("query")
    search.add_argument("--collection", action="append", required=True, help="repeat for several")
    search.add_argument("-k", type=int, default=5)
    search.add_argument("--json", action="store_true", help="print the raw response")
    search.add_argument(
        "--agentic",
        action="store_true",
        help="show the steps the agent took (the service runs with ENABLE_AGENTIC_RAG=true)",
    )
    search.add_argument("--url", default=None, help="retrieval base URL (RAG_RETRIEVAL_URL)")
    search.add_argument("--api-key", default=None, help="retrieval key (RETRIEVAL_API_KEY)")

    ask = commands.add_parser(
        "ask",
        help="ask a question: the chat answers from the knowledge bases, then lists its sources",
        description="Streams the answer of the retrieval agent's chat (POST /v1/chat/completions; the service "
        "needs CHAT_UPSTREAM_BASE_URL), then a Sources: block, one [n] file (page, path) line per cited document.",
    )
    ask.add_argument("question")
    ask.add_argument("--collection", action="append", required=True, help="repeat for several")
    ask.add_argument("--model", default=None, help="the chat model (default: the first one GET /v1/models lists)")
    ask.add_argument("--url", default=None, help="retrieval base URL (RAG_RETRIEVAL_URL)")
    ask.add_argument("--api-key", default=None, help="retrieval key (RETRIEVAL_API_KEY)")

    mcp = commands.add_parser(
        "mcp",
        help="serve the knowledge base to MCP clients (Claude Desktop, IDEs) on stdio",
        description="An MCP server on stdin/stdout with the tools search, read_document, list_documents and "
        "list_collections; it calls the running services (RAG_RETRIEVAL_URL, RAG_INGESTION_URL and their keys).",
    )
    mcp.add_argument(
        "--collection",
        action="append",
        default=None,
        help="a knowledge base list_collections reports; repeat for several (else RAG_MCP_COLLECTIONS, comma-separated)",
    )
    mcp.add_argument("--retrieval-url", default=None, help="retrieval base URL (RAG_RETRIEVAL_URL)")
    mcp.add_argument("--retrieval-api-key", default=None, help="retrieval key (RETRIEVAL_API_KEY)")
    mcp.add_argument("--ingestion-url", default=None, help="ingestion base URL (RAG_INGESTION_URL)")
    mcp.add_argument("--ingestion-api-key", default=None, help="ingestion key (INGESTION_API_KEY)")
    _memory_parser(commands)
    _open_webui_parser(commands)
    return root


def _ignore_flags(command: argparse.ArgumentParser) -> None:
    # Besides the default ignores and the folders' .gitignore / .ragignore (rag_cli.ignores).
    command.add_argument(
        "--include",
        action="append",
        default=None,
        metavar="GLOB",
        help="only files matching this gitignore-style glob (e.g. '*.md'); repeat for several",
    )
    command.add_argument(
        "--exclude",
        action="append",
        default=None,
        metavar="GLOB",
        help="also leave out what matches this gitignore-style glob (e.g. 'drafts/'); repeat for several",
    )


def _open_webui_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    open_webui = commands.add_parser("open-webui", help="keep the index in step with an Open WebUI")
    actions = open_webui.add_subparsers(dest="open_webui_command", required=True, metavar="ACTION")
    prune = actions.add_parser(
        "prune",
        help="remove the chunks of files and knowledge bases Open WebUI no longer has",
        description="Delete every file-<id> tenant whose file, and every <id> tenant whose knowledge base, "
        "Open WebUI no longer has; memory tenants and names that are no Open WebUI id are never touched. "
        "Nothing is removed when a listing fails or comes back partial.",
    )
    prune.add_argument("--url", default=None, help="Open WebUI's base URL (OPEN_WEBUI_URL)")
    prune.add_argument("--token", default=None, help="an Open WebUI admin's API key or token (OPEN_WEBUI_API_KEY)")
    prune.add_argument("--dry-run", action="store_true", help="print what would be removed, remove nothing")
    prune.add_argument("--ingestion-url", default=None, help="ingestion base URL (RAG_INGESTION_URL)")
    prune.add_argument("--ingestion-api-key", default=None, help="ingestion key (INGESTION_API_KEY)")


def _memory_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Every memory subcommand takes the connection flags after its own arguments, like `rag search`.
    connection = argparse.ArgumentParser(add_help=False)
    connection.add_argument("--url", default=None, help="retrieval base URL (RAG_RETRIEVAL_URL)")
    connection.add_argument("--api-key", default=None, help="retrieval key (RETRIEVAL_API_KEY)")
    memory = commands.add_parser(
        "memory",
        help="read and edit a user's long-term memory (the retrieval agent's facts)",
        description="Each user's facts are Markdown files the retrieval agent keeps under MEMORY_PATH/<user>/, "
        "every change a Git commit; these commands go through its /api/v1/memory API (ENABLE_MEMORY=true).",
    )
    actions = memory.add_subparsers(dest="memory_command", required=True, metavar="ACTION")
    show = actions.add_parser("show", parents=[connection], help="a user's facts, or one fact in full")
    show.add_argument("user", metavar="USER")
    show.add_argument("fact_id", metavar="FACT_ID", nargs="?", default=None)
    show.add_argument("--json", action="store_true", help="print the raw response")
    log = actions.add_parser("log", parents=[connection], help="the history of a user's memory, newest first")
    log.add_argument("user", metavar="USER")
    log.add_argument("--fact", dest="fact_id", metavar="FACT_ID", default=None, help="only commits touching this fact")
    log.add_argument("--limit", type=int, default=None, help="at most N commits (the service's default: 50)")
    log.add_argument("--json", action="store_true", help="print the raw response")
    edit = actions.add_parser("edit", parents=[connection], help="rewrite a fact in $VISUAL/$EDITOR (else vi)")
    edit.add_argument("user", metavar="USER")
    edit.add_argument("fact_id", metavar="FACT_ID")
    edit.add_argument("--text", default=None, help="the new text, without opening an editor (for scripts)")
    add = actions.add_parser("add", parents=[connection], help="remember a new fact")
    add.add_argument("user", metavar="USER")
    add.add_argument("text", metavar="TEXT")
    add.add_argument("--language", default=None, help="ISO 639-1 code of the text (its BM25 stemmer)")
    forget = actions.add_parser("forget", parents=[connection], help="delete a fact (moved to deleted/)")
    forget.add_argument("user", metavar="USER")
    forget.add_argument("fact_id", metavar="FACT_ID")
    forget.add_argument("--reason", default=None, help="recorded in the file and the commit")
    wipe = actions.add_parser("wipe", parents=[connection], help="forget a user entirely, history included")
    wipe.add_argument("user", metavar="USER")
    wipe.add_argument("--yes", action="store_true", help="required: there is no undo")


def main(argv: list[str] | None = None) -> int:
    """Run a command; the exit status is the return value."""
    args = parser().parse_args(argv)
    try:
        return _run(args)
    except UsageError as exc:  # a malformed URL, port or level from a flag or the environment
        sys.stderr.write(f"rag {args.command}: {exc}\n")
        return 2


def _log_format() -> LogFormat:
    value = os.environ.get("LOG_FORMAT", "text").lower()
    if value == "json":
        return "json"
    if value != "text":
        raise UsageError(f"LOG_FORMAT={value!r} is not one of json, text")
    return "text"


def _log_level() -> str:
    value = os.environ.get("LOG_LEVEL", "info").lower()
    if value not in LOG_LEVELS:
        raise UsageError(f"LOG_LEVEL={value!r} is not one of {', '.join(LOG_LEVELS)}")
    return value


def _run(args: argparse.Namespace) -> int:
    if args.command == "dev":
        from rag_cli.dev import DevOptions, default_qdrant_path, run_dev

        options = DevOptions(
            host=args.host,
            ingestion_port=env_port("RAG_INGESTION_PORT", 8001) if args.ingestion_port is None else args.ingestion_port,
            retrieval_port=env_port("RAG_RETRIEVAL_PORT", 8002) if args.retrieval_port is None else args.retrieval_port,
            qdrant_path=(args.qdrant_path or default_qdrant_path()).resolve(),
            ready_timeout=args.ready_timeout,
            log_level=args.log_level or _log_level(),
            log_format=_log_format(),
        )
        return run_dev(options)
    if args.command == "migrate":
        from rag_cli.dev import default_qdrant_path
        from rag_cli.migrate import run_migrate

        return run_migrate((args.source or default_qdrant_path()).resolve())
    if args.command == "optimize":
        from rag_cli.dev import default_qdrant_path
        from rag_cli.migrate import run_optimize

        return run_optimize((args.source or default_qdrant_path()).resolve())
    if args.command == "ingest":
        from rag_cli.commands import run_ingest

        if args.concurrency < 1:
            sys.stderr.write("rag ingest: --concurrency must be at least 1\n")
            return 2
        from rag_cli.ignores import rules_from

        return run_ingest(
            ingestion_endpoint(args.url, args.api_key),
            args.paths,
            collection=args.collection,
            user_id=args.user_id,
            concurrency=args.concurrency,
            rules=rules_from(args.include, args.exclude),
        )
    if args.command == "sync":
        return _sync(args)
    if args.command == "memory":
        return _memory(args)
    if args.command == "open-webui":
        from rag_cli.prune import run_prune

        return run_prune(
            ingestion_endpoint(args.ingestion_url, args.ingestion_api_key, flag="--ingestion-url"),
            open_webui_endpoint(args.url, args.token),
            dry_run=args.dry_run,
        )
    if args.command == "ask":
        from rag_cli.ask import run_ask

        return run_ask(
            retrieval_endpoint(args.url, args.api_key), args.question, collections=args.collection, model=args.model
        )
    if args.command == "mcp":
        from rag_cli.mcp_backend import COLLECTIONS_ENV, run_mcp

        collections = args.collection or [
            name.strip() for name in os.environ.get(COLLECTIONS_ENV, "").split(",") if name.strip()
        ]
        return run_mcp(
            retrieval=retrieval_endpoint(args.retrieval_url, args.retrieval_api_key, flag="--retrieval-url"),
            ingestion=ingestion_endpoint(args.ingestion_url, args.ingestion_api_key, flag="--ingestion-url"),
            collections=collections,
        )
    from rag_cli.commands import run_search

    return run_search(
        retrieval_endpoint(args.url, args.api_key),
        args.query,
        collections=args.collection,
        k=args.k,
        as_json=args.json,
        agentic=args.agentic,
    )


def _sync(args: argparse.Namespace) -> int:
    from rag_cli.ignores import rules_from
    from rag_cli.sync.plan import SyncOptions
    from rag_cli.sync.watch import run_sync

    problem = None
    if args.concurrency < 1:
        problem = "--concurrency must be at least 1"
    elif args.debounce_ms < MIN_DEBOUNCE_MS:
        problem = f"--debounce-ms must be at least {MIN_DEBOUNCE_MS}"
    elif args.interval <= 0:
        problem = "--interval must be positive"
    elif args.watch and args.dry_run:
        problem = "--dry-run and --watch do not go together"
    if problem is not None:
        sys.stderr.write(f"rag sync: {problem}\n")
        return 2
    options = SyncOptions(
        collection=args.collection,
        user_id=args.user_id,
        concurrency=args.concurrency,
        force=args.force,
        dry_run=args.dry_run,
        s3_endpoint_url=args.s3_endpoint_url,
        ignore_rules=rules_from(args.include, args.exclude),
    )
    return run_sync(
        ingestion_endpoint(args.url, args.api_key),
        args.source,
        options,
        watch=args.watch,
        debounce_ms=args.debounce_ms,
        interval_s=args.interval,
    )


def _memory(args: argparse.Namespace) -> int:
    from rag_cli.memory import USAGE_ERROR, MemoryCommands

    if args.memory_command == "log" and args.limit is not None and args.limit < 1:
        sys.stderr.write("rag memory log: --limit must be at least 1\n")
        return USAGE_ERROR
    memory = MemoryCommands(retrieval_endpoint(args.url, args.api_key))
    if args.memory_command == "show":
        return memory.show(args.user, args.fact_id, as_json=args.json)
    if args.memory_command == "log":
        return memory.log(args.user, fact_id=args.fact_id, limit=args.limit, as_json=args.json)
    if args.memory_command == "edit":
        return memory.edit(args.user, args.fact_id, text=args.text)
    if args.memory_command == "add":
        return memory.add(args.user, args.text, language=args.language)
    if args.memory_command == "forget":
        return memory.forget(args.user, args.fact_id, reason=args.reason)
    return memory.wipe(args.user, confirmed=args.yes)


if __name__ == "__main__":
    sys.exit(main())
