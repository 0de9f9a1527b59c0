"""``rag dev``: ingestion-service and retrieval-agent in one process on one embedded Qdrant.

The embedded store can be opened by one process only, so both apps share this process (and,
through ``rag_runtime.store.open_store``, one engine instance) and one copy of the models. Each app still runs alone against a Qdrant
server in production.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import sys
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import uvicorn

from rag_cli.config import checkout_root
from rag_runtime.http import LogFormat, configure_logging
from rag_runtime.store import STORE_IN_USE, is_legacy_store
from shared_contract import ContractConfigError, LegacyStoreError, load_settings

if TYPE_CHECKING:
    from ingestion_service.settings import Settings as IngestionSettings
    from rag_runtime.embedding import ContractEmbedder
    from retrieval_agent.settings import Settings as RetrievalSettings

logger = logging.getLogger("rag_cli.dev")


@dataclass(frozen=True, slots=True)
class DevOptions:
    """What ``rag dev`` was asked to do."""

    host: str
    ingestion_port: int
    retrieval_port: int
    qdrant_path: Path
    ready_timeout: float
    log_level: str
    log_format: LogFormat = "text"


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signal handling to ``rag dev`` (two servers share one loop)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _say(message: str, stream: Any) -> None:
    """One line for people and for scripts waiting on it (flushed at once)."""
    stream.write(f"{message}\n")
    stream.flush()


def _api_key(variable: str) -> tuple[str, bool]:
    value = os.environ.get(variable, "").strip()
    if value:
        return value, False
    return secrets.token_urlsafe(32), True


def default_qdrant_path() -> Path:
    """QDRANT_PATH, else ``.data/qdrant`` in the checkout (git-ignored)."""
    configured = os.environ.get("QDRANT_PATH")
    return Path(configured) if configured else checkout_root() / ".data" / "qdrant"


def citation_key(qdrant_path: Path) -> str:
    """CITATION_SIGNING_KEY, else the key kept beside the store (made on the first start), so links in
    stored chats keep opening across restarts."""
    configured = os.environ.get("CITATION_SIGNING_KEY", "").strip()
    if configured:
        return configured
    path = qdrant_path.parent / "citation-signing-key"
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        key = secrets.token_urlsafe(32)
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(key)
        return key


def _browser_host(host: str) -> str:
    """Where a browser on this machine reaches a server bound to ``host``."""
    return "127.0.0.1" if host in {"0.0.0.0", "::", ""} else host  # noqa: S104 - compared, not bound


def _models_dir() -> None:
    if not os.environ.get("LOCAL_MODELS_DIR"):
        candidate = checkout_root() / ".cache" / "models"
        if candidate.is_dir():
            os.environ["LOCAL_MODELS_DIR"] = str(candidate)


def shared_embedder(ingestion: IngestionSettings, retrieval: RetrievalSettings) -> ContractEmbedder:
    """One process, one copy of the models: both services embed with the same contract settings.

    Queries run as the retrieval agent would run them alone (QUERY_EMBEDDING_QUANTIZATION, its thread
    count). The dense model that embeds queries only (the int8 copy, or the fp32 model when documents
    take the fused pass) gets the retrieval agent's query thread count.
    """
    from rag_runtime.embedding import ContractEmbedder, fused_pass_configured

    dense_threads = None
    if retrieval.query_int8 or fused_pass_configured(ingestion, sparse=ingestion.enable_sparse_embeddings):
        dense_threads = retrieval.query_embedding_threads or None
    return ContractEmbedder(ingestion, dense_threads=dense_threads, query_int8=retrieval.query_int8)


def build_apps(options: DevOptions, ingestion_key: str, retrieval_key: str) -> tuple[Any, Any]:
    """Both apps with explicit settings on the shared embedded store (other variables from the env)."""
    from ingestion_service.main import create_app as create_ingestion
    from ingestion_service.runtime import ServiceHooks
    from ingestion_service.settings import Settings as IngestionSettings
    from retrieval_agent.main import create_app as create_retrieval
    from retrieval_agent.settings import Settings as RetrievalSettings

    # --log-level holds for the services' own loggers too (their lifespans set them from LOG_LEVEL).
    # Citation links open the ingestion service's page images, signed with one key for both apps.
    common: dict[str, Any] = {
        "qdrant_uri": None,
        "qdrant_path": options.qdrant_path,
        "host": options.host,
        "log_level": options.log_level.upper(),
        "citation_signing_key": citation_key(options.qdrant_path),
    }
    originals_dir = os.environ.get("ORIGINALS_DIR") or options.qdrant_path.parent / "originals"
    base_url = os.environ.get("CITATION_BASE_URL") or f"http://{_browser_host(options.host)}:{options.ingestion_port}"
    ingestion = load_settings(
        IngestionSettings,
        api_key=ingestion_key,
        port=options.ingestion_port,
        originals_dir=originals_dir,
        **common,
    )
    retrieval = load_settings(
        RetrievalSettings,
        api_key=retrieval_key,
        port=options.retrieval_port,
        citation_base_url=base_url,
        **common,
    )
    embedder = shared_embedder(ingestion, retrieval)
    return (
        create_ingestion(ingestion, hooks=ServiceHooks(embedder=embedder)),
        create_retrieval(retrieval, embedder=embedder),
    )


def server_configs(options: DevOptions, ingestion_app: Any, retrieval_app: Any) -> list[uvicorn.Config]:
    """uvicorn's configuration of the ingestion server, then the retrieval server. Both bound their
    graceful shutdown, so SIGTERM stops ``rag dev`` even while a request runs on."""
    from retrieval_agent.main import SHUTDOWN_GRACE_SECONDS as RETRIEVAL_GRACE_SECONDS

    return [
        uvicorn.Config(
            ingestion_app,
            host=options.host,
            port=options.ingestion_port,
            log_level=options.log_level,
            log_config=None,  # its loggers, access lines included, go to rag dev's one handler
            # Running ingests get SHUTDOWN_GRACE_SECONDS, then abort and keep their previous version.
            timeout_graceful_shutdown=ingestion_app.state.settings.shutdown_grace_seconds,
        ),
        uvicorn.Config(
            retrieval_app,
            host=options.host,
            port=options.retrieval_port,
            log_level=options.log_level,
            log_config=None,  # its loggers, access lines included, go to rag dev's one handler
            # A chat stream that never ends would otherwise hold the process after SIGTERM.
            timeout_graceful_shutdown=RETRIEVAL_GRACE_SECONDS,
        ),
    ]


async def _wait_ready(
    urls: dict[str, str],
    servers: Mapping[str, tuple[uvicorn.Server, asyncio.Task[None]]],
    timeout: float,
    qdrant_path: Path,
) -> None:
    """Return once every ``/health/ready`` answers 200; raise RuntimeError on timeout, a dead
    server or a store another process holds. A server is asked only once it listens: before, its
    port may be another process's, whose 200 would say nothing of this one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pending = dict(urls)
    last: dict[str, str] = {}
    async with httpx.AsyncClient(timeout=5.0) as client:
        while pending:
            for _server, task in servers.values():
                if task.done():
                    raise RuntimeError(f"{task.get_name()} stopped during start-up (see the log above)")
            for name, url in list(pending.items()):
                if not servers[name][0].started:
                    last[name] = "starting"
                    continue
                try:
                    response = await client.get(f"{url}/health/ready")
                except httpx.HTTPError as exc:
                    last[name] = type(exc).__name__
                    continue
                if response.status_code == 200:
                    del pending[name]
                elif STORE_IN_USE in response.text:
                    # Never clears while that process runs: waiting out the ready timeout is pointless.
                    raise RuntimeError(
                        f"the embedded store at {qdrant_path} is in use by another process "
                        "(another rag dev, or a script that opened it); stop it or pass another --qdrant-path"
                    )
                else:
                    last[name] = f"{response.status_code} {response.text[:300]}"
            if not pending:
                return
            if loop.time() > deadline:
                details = "; ".join(f"{name}: {last.get(name, 'no answer')}" for name in pending)
                raise RuntimeError(f"not ready after {timeout:.0f}s: {details}")
            await asyncio.sleep(0.25)


async def serve(options: DevOptions, out: Any = sys.stdout) -> int:
    """Run both services until SIGINT/SIGTERM; 0 on a clean stop, 1 when start-up fails."""
    _models_dir()
    ingestion_key, generated_ingestion = _api_key("INGESTION_API_KEY")
    retrieval_key, generated_retrieval = _api_key("RETRIEVAL_API_KEY")
    if is_legacy_store(options.qdrant_path):
        # Refuse before anything opens the directory: never start half-way on an old store.
        _say(f"rag dev: {LegacyStoreError(str(options.qdrant_path))}", sys.stderr)
        return 1
    try:
        ingestion_app, retrieval_app = build_apps(options, ingestion_key, retrieval_key)
    except ContractConfigError as exc:
        _say(f"rag dev: invalid configuration: {exc}", sys.stderr)
        return 1
    servers = [_Server(config) for config in server_configs(options, ingestion_app, retrieval_app)]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    async def run(server: _Server) -> None:
        try:
            await server.serve()
        except SystemExit:  # uvicorn exits on a failed bind or lifespan start-up
            logger.debug("uvicorn server exited during start-up")

    tasks = [
        asyncio.create_task(run(servers[0]), name="ingestion-service"),
        asyncio.create_task(run(servers[1]), name="retrieval-agent"),
    ]
    urls = {
        "ingestion": f"http://{options.host}:{options.ingestion_port}",
        "retrieval": f"http://{options.host}:{options.retrieval_port}",
    }
    _say(f"rag dev: embedded Qdrant at {options.qdrant_path}", out)
    if generated_ingestion:
        _say(f"rag dev: generated INGESTION_API_KEY={ingestion_key}", out)
    if generated_retrieval:
        _say(f"rag dev: generated RETRIEVAL_API_KEY={retrieval_key}", out)
    code = 0
    started = {"ingestion": (servers[0], tasks[0]), "retrieval": (servers[1], tasks[1])}
    waiter = asyncio.create_task(_wait_ready(urls, started, options.ready_timeout, options.qdrant_path))
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if waiter in done:
        error = waiter.exception()
        if error is None:
            _say(f"ready: ingestion={urls['ingestion']} retrieval={urls['retrieval']}", out)
            # Run until a signal arrives or a server dies.
            await asyncio.wait({stopper, *tasks}, return_when=asyncio.FIRST_COMPLETED)
            if not stop.is_set():
                _say("rag dev: a server stopped unexpectedly", sys.stderr)
                code = 1
        else:
            _say(f"rag dev: start-up failed: {error}", sys.stderr)
            code = 1
    else:
        waiter.cancel()
    stopper.cancel()
    for server in servers:
        server.should_exit = True
    await asyncio.gather(*tasks, return_exceptions=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.remove_signal_handler(sig)
    _say("rag dev: stopped", out)
    return code


def run_dev(options: DevOptions) -> int:
    """Entry point of ``rag dev``."""
    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    # Plain lines for people at a terminal unless LOG_FORMAT says json (the services default to JSON).
    configure_logging(options.log_level.upper(), options.log_format)
    # The readiness poll would log every probe.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(serve(options))


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed, the loop ``uvicorn.run`` gives each service in production (serving
    from our own loop, uvicorn picks none): ~0.1 ms less per request on its thread hops."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
