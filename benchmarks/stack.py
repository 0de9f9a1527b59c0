"""Run the `rag dev` stack (both services, one embedded Qdrant store) for a benchmark, or attach to one.

Attach mode: set BENCH_INGESTION_URL and BENCH_RETRIEVAL_URL (and BENCH_INGESTION_KEY /
BENCH_RETRIEVAL_KEY when the keys differ from the defaults). Retrieval settings cannot be switched
on a stack we did not start, so configs that need a restart are refused in attach mode.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from benchmarks.beir import REPO_ROOT

INGESTION_KEY = "bench-ingestion-key-0123456789abcdef"  # services want >= 32 chars
RETRIEVAL_KEY = "bench-retrieval-key-0123456789abcdef"
READY_TIMEOUT_S = 300.0


class StackError(RuntimeError):
    """The stack did not start or died; the message carries the tail of its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Stack:
    ingestion_url: str
    retrieval_url: str
    ingestion_key: str
    retrieval_key: str
    pid: int | None = None  # the process hosting both services; None when attached
    log_path: Path | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def attached(self) -> bool:
        return self.pid is None


def attached_stack() -> Stack | None:
    ingestion = os.environ.get("BENCH_INGESTION_URL")
    retrieval = os.environ.get("BENCH_RETRIEVAL_URL")
    if not ingestion or not retrieval:
        return None
    return Stack(
        ingestion_url=ingestion.rstrip("/"),
        retrieval_url=retrieval.rstrip("/"),
        ingestion_key=os.environ.get("BENCH_INGESTION_KEY", os.environ.get("INGESTION_API_KEY", INGESTION_KEY)),
        retrieval_key=os.environ.get("BENCH_RETRIEVAL_KEY", os.environ.get("RETRIEVAL_API_KEY", RETRIEVAL_KEY)),
    )


def base_env(qdrant_path: Path, extra: Mapping[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    # Settings the benchmark controls must not leak in from the caller's shell or .env.
    for name in list(env):
        if name.startswith(("ENABLE_HYBRID", "HYBRID_", "ENABLE_RERANK", "RERANK", "SEARCH_MODE", "QDRANT_")):
            del env[name]
    env.setdefault("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache" / "models"))
    env.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
    env.update(
        {
            "INGESTION_API_KEY": INGESTION_KEY,
            "RETRIEVAL_API_KEY": RETRIEVAL_KEY,
            "QDRANT_PATH": str(qdrant_path),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.pop("API_KEY", None)  # each service takes its key from the forked variables above
    env.update(extra)
    return env


def _pump(stream: object, log_path: Path, ready: threading.Event) -> None:
    assert hasattr(stream, "readline")
    with log_path.open("a", encoding="utf-8") as log:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            log.write(line)
            log.flush()
            if line.startswith("ready:"):
                ready.set()


def _log_tail(log_path: Path, lines: int = 40) -> str:
    if not log_path.exists():
        return "(no log)"
    return "\n".join(log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health/ready", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def rag_command() -> list[str]:
    """The `rag` console script of this venv (its process is the server itself, for RSS)."""
    script = Path(sys.executable).parent / "rag"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from rag_cli.__main__ import main; sys.exit(main())"]


def rag_available() -> bool:
    try:
        return importlib.util.find_spec("rag_cli.__main__") is not None
    except ImportError:
        return False


@contextmanager
def running_stack(
    qdrant_path: Path,
    env: Mapping[str, str] | None = None,
    *,
    log_path: Path | None = None,
    ready_timeout: float = READY_TIMEOUT_S,
) -> Iterator[Stack]:
    """Start `rag dev` on free loopback ports and stop it afterwards (or attach, see module doc)."""
    attached = attached_stack()
    if attached is not None:
        if env:
            raise StackError(
                f"attached to {attached.retrieval_url}: cannot apply retrieval settings {sorted(env)}; "
                "unset BENCH_*_URL to let the benchmark start its own stack"
            )
        yield attached
        return
    qdrant_path.mkdir(parents=True, exist_ok=True)
    ingestion_port, retrieval_port = free_port(), free_port()
    log_path = log_path or qdrant_path.parent / "stack.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = base_env(qdrant_path, env or {})
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"\n=== rag dev {time.strftime('%Y-%m-%dT%H:%M:%S')} env={dict(env or {})}\n")
    command = [
        *rag_command(),
        "dev",
        "--ingestion-port",
        str(ingestion_port),
        "--retrieval-port",
        str(retrieval_port),
        "--qdrant-path",
        str(qdrant_path),
        "--log-level",
        os.environ.get("BENCH_STACK_LOG_LEVEL", "warning"),  # no per-request access log in timings
    ]
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    ready = threading.Event()
    pump = threading.Thread(target=_pump, args=(process.stdout, log_path, ready), daemon=True)
    pump.start()
    stack = Stack(
        ingestion_url=f"http://127.0.0.1:{ingestion_port}",
        retrieval_url=f"http://127.0.0.1:{retrieval_port}",
        ingestion_key=INGESTION_KEY,
        retrieval_key=RETRIEVAL_KEY,
        pid=process.pid,
        log_path=log_path,
        env=dict(env or {}),
    )
    try:
        deadline = time.monotonic() + ready_timeout
        while not ready.is_set():
            if process.poll() is not None:
                raise StackError(f"rag dev exited with {process.returncode}:\n{_log_tail(log_path)}")
            if _healthy(stack.ingestion_url) and _healthy(stack.retrieval_url):
                break
            if time.monotonic() > deadline:
                raise StackError(f"rag dev not ready after {ready_timeout:.0f}s:\n{_log_tail(log_path)}")
            ready.wait(0.5)
        yield stack
    finally:
        _stop(process)
        pump.join(timeout=5)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    # SIGINT lets uvicorn run the lifespans (closing the embedded store cleanly).
    for sig, wait_s in ((signal.SIGINT, 30.0), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
