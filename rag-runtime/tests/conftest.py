from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache" / "models"))

from rag_runtime.embedding import ContractEmbedder  # noqa: E402
from shared_contract import ContractSettings, load_settings  # noqa: E402

# Every contract variable but where the offline models are (the tests read those), and the old
# name SPARSE_EMBEDDING_MODEL still accepts.
_MODEL_LOCATIONS = {"local_models_dir", "fastembed_cache_path"}
CONTRACT_ENV_VARS = [name.upper() for name in ContractSettings.model_fields if name not in _MODEL_LOCATIONS]
CONTRACT_ENV_VARS.append("SPARSE_QUERY_MODEL")


@pytest.fixture(autouse=True)
def _clean_contract_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests see only the variables they set; a stray .env in the cwd must not leak in."""
    for name in CONTRACT_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session", autouse=True)
def _memory_stores_on_tmpfs() -> Iterator[None]:
    """':memory:' stores live in temporary directories; on tmpfs their bootstrap (one synced update
    per payload index) takes milliseconds instead of seconds."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 2 * 2**30):
        yield
        return
    previous, tempfile.tempdir = tempfile.tempdir, tempfile.mkdtemp(prefix=f"rag-runtime-tests-{os.getpid()}-", dir=shm)
    try:
        yield
    finally:
        shutil.rmtree(tempfile.tempdir, ignore_errors=True)
        tempfile.tempdir = previous


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests (``@pytest.mark.anyio``) run on asyncio only; session-wide so that module-scoped
    async fixtures (a bootstrapped store shared by a module) can run on the same loop."""
    return "asyncio"


@pytest.fixture
def settings() -> ContractSettings:
    return load_settings(ContractSettings, qdrant_uri=":memory:")


@pytest.fixture(scope="session")
def embedder() -> ContractEmbedder:
    """The default models, built offline by `make models`; loaded once per session."""
    models_dir = Path(os.environ["LOCAL_MODELS_DIR"])
    if not (models_dir / "sentence-transformers__all-MiniLM-L6-v2" / "build-manifest.json").is_file():
        pytest.fail(f"offline models missing in {models_dir}: run `make models`")
    instance = ContractEmbedder(ContractSettings(qdrant_uri=":memory:"))
    instance.warm_up()
    return instance


class RecordingDense:
    """A dense backend that records its inputs and returns a fixed-size vector."""

    model_name = "sentence-transformers/all-MiniLM-L6-v2"
    max_tokens: int | None = 256

    def __init__(self, dim: int = 384, fail: bool = False) -> None:
        self.dim = dim
        self.fail = fail
        self.seen: list[str] = []

    def warm_up(self) -> None:
        return None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail:
            raise RuntimeError("backend exploded")
        self.seen.extend(texts)
        return [[1.0 / math.sqrt(self.dim)] * self.dim for _ in texts]
