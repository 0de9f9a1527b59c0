"""Where the CLI finds the services, their keys and the checkout."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_INGESTION_URL = "http://127.0.0.1:8001"
DEFAULT_RETRIEVAL_URL = "http://127.0.0.1:8002"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A service base URL and its Bearer key."""

    url: str
    api_key: str | None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


def ingestion_endpoint(url: str | None, api_key: str | None) -> Endpoint:
    """Flags first, then RAG_INGESTION_URL / INGESTION_API_KEY, then the ``rag dev`` default."""
    base = url or os.environ.get("RAG_INGESTION_URL") or DEFAULT_INGESTION_URL
    return Endpoint(base.rstrip("/"), api_key or os.environ.get("INGESTION_API_KEY"))


def retrieval_endpoint(url: str | None, api_key: str | None) -> Endpoint:
    """Flags first, then RAG_RETRIEVAL_URL / RETRIEVAL_API_KEY, then the ``rag dev`` default."""
    base = url or os.environ.get("RAG_RETRIEVAL_URL") or DEFAULT_RETRIEVAL_URL
    return Endpoint(base.rstrip("/"), api_key or os.environ.get("RETRIEVAL_API_KEY"))


def checkout_root(start: Path | None = None) -> Path:
    """The workspace checkout holding ``start`` (the folder with uv.lock and rag-cli/), else ``start``."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "uv.lock").is_file() and (candidate / "rag-cli").is_dir():
            return candidate
    package_root = Path(__file__).resolve().parents[3]
    if (package_root / "uv.lock").is_file():
        return package_root
    return here
