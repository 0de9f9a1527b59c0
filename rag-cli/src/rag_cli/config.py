"""Where the CLI finds the services, their keys and the checkout."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import httpx

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


class UsageError(Exception):
    """A flag or an environment variable the command cannot use (exit 2); the message names it."""


def _base_url(url: str | None, flag: str, variable: str, default: str) -> str:
    """The flag, else the variable, else the default; an unusable URL is a :class:`UsageError` naming its origin."""
    value, origin = (url, flag) if url else (os.environ.get(variable), variable)
    if not value:
        return default
    # Checked once here: httpx would only raise InvalidURL on the first request, mid-command.
    try:
        parsed = httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise UsageError(f"{origin} {value!r} is not a valid URL: {exc}") from exc
    if parsed.scheme not in {"http", "https"} or not parsed.host:
        raise UsageError(f"{origin} {value!r} is not a valid URL: expected http(s)://host[:port]")
    return value.rstrip("/")


def ingestion_endpoint(url: str | None, api_key: str | None, *, flag: str = "--url") -> Endpoint:
    """Flags first, then RAG_INGESTION_URL / INGESTION_API_KEY, then the ``rag dev`` default.

    ``flag`` names the URL flag in a :class:`UsageError` for a malformed URL."""
    base = _base_url(url, flag, "RAG_INGESTION_URL", DEFAULT_INGESTION_URL)
    return Endpoint(base, api_key or os.environ.get("INGESTION_API_KEY"))


def retrieval_endpoint(url: str | None, api_key: str | None, *, flag: str = "--url") -> Endpoint:
    """Flags first, then RAG_RETRIEVAL_URL / RETRIEVAL_API_KEY, then the ``rag dev`` default.

    ``flag`` names the URL flag in a :class:`UsageError` for a malformed URL."""
    base = _base_url(url, flag, "RAG_RETRIEVAL_URL", DEFAULT_RETRIEVAL_URL)
    return Endpoint(base, api_key or os.environ.get("RETRIEVAL_API_KEY"))


def open_webui_endpoint(url: str | None, token: str | None) -> Endpoint:
    """Flags first, then OPEN_WEBUI_URL / OPEN_WEBUI_API_KEY; both are required (a :class:`UsageError`)."""
    if not url and not os.environ.get("OPEN_WEBUI_URL"):
        raise UsageError("give Open WebUI's address: --url or OPEN_WEBUI_URL")
    base = _base_url(url, "--url", "OPEN_WEBUI_URL", "")
    key = token or os.environ.get("OPEN_WEBUI_API_KEY")
    if not key:
        raise UsageError("give an Open WebUI admin's API key or token: --token or OPEN_WEBUI_API_KEY")
    return Endpoint(base, key)


def env_port(variable: str, default: int) -> int:
    """A port from ``variable``, else ``default``; anything but 1-65535 is a :class:`UsageError`."""
    value = os.environ.get(variable)
    if value is None or not value.strip():
        return default
    try:
        port = int(value)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise UsageError(f"{variable}={value!r} is not a port number (1-65535)")
    return port


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
