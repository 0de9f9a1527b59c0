"""What every deploy check shares: the files, the allow-lists, a check's report, the apps' routes."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import env_example
import yaml

REPO_ROOT = env_example.REPO_ROOT
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
K8S_DIR = REPO_ROOT / "deploy" / "k8s"
HELM_QDRANT_VALUES = REPO_ROOT / "deploy" / "helm" / "qdrant-values.yaml"
PROMETHEUS_CONFIG = REPO_ROOT / "deploy" / "prometheus" / "prometheus.yml"
DOCKERFILES = {
    "ingestion-service": REPO_ROOT / "ingestion-service" / "Dockerfile",
    "retrieval-agent": REPO_ROOT / "retrieval-agent" / "Dockerfile",
}
# Compose service / image repository -> the settings class that reads its environment.
SERVICE_OF: dict[str, env_example.Service] = {"ingestion-service": "ingestion", "retrieval-agent": "retrieval"}
OUR_IMAGES: dict[str, env_example.Service] = {"rag/ingestion-service": "ingestion", "rag/retrieval-agent": "retrieval"}
K8S_VERSIONS = ("1.30.0", "1.37.0")
REQUIRED_PROFILES = {"vision", "agent", "webui", "webui-fork", "observability"}

# What every Open WebUI (stock or the fork) is given: sessions, the chat connection, uploads to MinIO.
_OPEN_WEBUI_ENV = frozenset(
    {
        "WEBUI_SECRET_KEY",
        "WEBUI_SECRET_KEY_FILE",
        "OPENAI_API_BASE_URL",
        "OPENAI_API_KEY",
        "STORAGE_PROVIDER",
        "S3_ENDPOINT_URL",
        "S3_REGION_NAME",
        "S3_ADDRESSING_STYLE",
        "S3_BUCKET_NAME",
        "S3_ACCESS_KEY_ID",
        "S3_SECRET_ACCESS_KEY",
    }
)
# Variables third-party images read, per image repository: explicit, so a typo is caught.
THIRD_PARTY_ENV: dict[str, frozenset[str]] = {
    "qdrant/qdrant": frozenset({"QDRANT__SERVICE__API_KEY", "QDRANT__TELEMETRY_DISABLED", "QDRANT_INIT_FILE_PATH"}),
    "minio/minio": frozenset({"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"}),
    # The bucket job's own shell script reads these (docker-compose.yml, minio-buckets).
    "minio/mc": frozenset(
        {
            "MINIO_ROOT_USER",
            "MINIO_ROOT_PASSWORD",
            "S3_BUCKET",
            "ORIGINALS_BUCKET",
            "S3_ACCESS_KEY_ID",
            "S3_SECRET_ACCESS_KEY",
        }
    ),
    "ghcr.io/berriai/litellm": frozenset(
        {"LITELLM_MASTER_KEY", "LITELLM_UPSTREAM_API_BASE", "LITELLM_UPSTREAM_API_KEY"}
    ),
    "ghcr.io/open-webui/open-webui": _OPEN_WEBUI_ENV
    | {
        # Stock Open WebUI's external document loader.
        "CONTENT_EXTRACTION_ENGINE",
        "EXTERNAL_DOCUMENT_LOADER_URL",
        "EXTERNAL_DOCUMENT_LOADER_API_KEY",
    },
    # The AarhusAI fork's hooks (../shared/reference/open-webui-contract.md, section 2).
    "aarhusai/open-webui": _OPEN_WEBUI_ENV
    | {
        "EXTERNAL_INGESTION_ENGINE",
        "EXTERNAL_INGESTION_URL",
        "EXTERNAL_INGESTION_API_KEY",
        "EXTERNAL_INGESTION_TIMEOUT",
        "RAG_RETRIEVAL_ENGINE",
        "RAG_EXTERNAL_RETRIEVAL_URL",
        "RAG_EXTERNAL_RETRIEVAL_API_KEY",
        "RAG_EXTERNAL_RETRIEVAL_TIMEOUT",
        "RAG_EXTERNAL_BYPASS_QUERY_GENERATION",
        "RAG_EXTERNAL_MESSAGE_COUNT",
        "RAG_EXTERNAL_USER_MESSAGES_ONLY",
    },
    "gotenberg/gotenberg": frozenset(),
    "prom/prometheus": frozenset(),
}
# Health endpoints of third-party images that probes may use.
THIRD_PARTY_PROBES: dict[str, frozenset[str]] = {"qdrant/qdrant": frozenset({"/readyz", "/livez", "/healthz"})}
# Compose services whose /metrics needs an API key, and the variable of their environment holding it
# (Qdrant's whitelist without a key is /, /healthz, /readyz and /livez: /metrics is not in it).
METRICS_KEY_ENV: dict[str, str] = {
    "ingestion-service": "API_KEY",
    "retrieval-agent": "API_KEY",
    "qdrant": "QDRANT__SERVICE__API_KEY",
}
# Runtime ENV in our images that no settings class reads: the interpreter, caches, telemetry switches.
DOCKERFILE_ENV = frozenset(
    {
        "PATH",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "HOME",
        "XDG_CACHE_HOME",
        "KREUZBERG_CACHE_DIR",
        "HF_HUB_OFFLINE",
        "HF_HUB_DISABLE_TELEMETRY",
        "HAYSTACK_TELEMETRY_ENABLED",
        "UV_COMPILE_BYTECODE",
        "UV_LINK_MODE",
        "UV_PYTHON_DOWNLOADS",
        "UV_PROJECT_ENVIRONMENT",
    }
)
SECRET_NAME = re.compile(r"(KEY|SECRET|PASSWORD|TOKEN)$")
INTERPOLATION = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(?::?[-?][^}]*)?\}")
# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?message}, ${NAME?message}: name, operator, rest.
REFERENCE = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(:?[-?])?([^}]*)\}")
PROBE_PATH = re.compile(r"(/health[a-z/]*|/readyz|/livez|/healthz)")


@dataclass
class Report:
    """Failures of one check."""

    name: str
    failures: list[str] = field(default_factory=lambda: list[str]())
    notes: list[str] = field(default_factory=lambda: list[str]())

    def fail(self, message: str) -> None:
        self.failures.append(message)


def tool(name: str) -> str:
    """A binary from this virtualenv (the wheels ship them), else from PATH; FileNotFoundError if neither."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found: run `make install` (dev dependency group)")
    return found


def image_repository(image: str) -> str:
    """``ghcr.io/x/y:tag@sha`` -> ``ghcr.io/x/y``; docker.io's implicit prefixes are dropped."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    for prefix in ("docker.io/library/", "docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name


def image_problem(image: str) -> str | None:
    """Why ``image`` is not pinned, or None."""
    if "@sha256:" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return f"{image}: no tag (pulls latest)"
    tag = last.split(":", 1)[1]
    if tag == "latest" or tag in {"main", "master", "stable", "edge", "nightly"}:
        return f"{image}: floating tag {tag!r}"
    if "$" in tag:
        return f"{image}: unresolved tag"
    return None


def load_yaml_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(doc, dict)]


def k8s_documents() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in sorted(K8S_DIR.glob("*.yaml")):
        for doc in load_yaml_documents(path):
            yield path, doc


def pod_spec(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    if doc.get("kind") in {"Deployment", "StatefulSet", "DaemonSet", "Job"}:
        spec: dict[str, Any] = doc["spec"]["template"]["spec"]
        return spec
    return None


def containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


class Routes:
    """Whether a service's FastAPI app answers GET on a path (its router's own matching; nothing starts)."""

    def __init__(self, apps: Mapping[env_example.Service, Any]) -> None:
        self._apps = dict(apps)

    def serves(self, service: env_example.Service, path: str) -> bool:
        from starlette.routing import Match

        scope = {"type": "http", "path": path, "method": "GET", "root_path": "", "headers": [], "query_string": b""}
        return any(route.matches(scope)[0] == Match.FULL for route in self._apps[service].router.routes)

    def describe(self) -> str:
        return ", ".join(f"{service}: {len(app.openapi()['paths'])} paths" for service, app in self._apps.items())


def load_routes() -> Routes:
    """Both services' apps, built by their factories (routes only: the lifespan never runs)."""
    from ingestion_service.main import create_app as ingestion_app
    from ingestion_service.settings import Settings as IngestionSettings
    from retrieval_agent.main import create_app as retrieval_app
    from retrieval_agent.settings import Settings as RetrievalSettings
    from shared_contract import load_settings

    key = "k" * 40
    return Routes(
        {
            "ingestion": ingestion_app(load_settings(IngestionSettings, api_key=key, _env_file=None)),
            "retrieval": retrieval_app(load_settings(RetrievalSettings, api_key=key, _env_file=None)),
        }
    )
