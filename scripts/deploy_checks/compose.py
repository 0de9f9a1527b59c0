"""docker-compose.yml and .env.example against the settings classes, the real Compose CLI and the apps' routes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import env_example
import yaml

from deploy_checks.common import (
    COMPOSE_FILE,
    INTERPOLATION,
    PROBE_PATH,
    REPO_ROOT,
    REQUIRED_PROFILES,
    SECRET_NAME,
    SERVICE_OF,
    THIRD_PARTY_ENV,
    Report,
    Routes,
    image_repository,
    tool,
)


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
        if SECRET_NAME.search(name) and value not in (None, "") and not str(value).startswith("${"):
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
    referenced = set(INTERPOLATION.findall("\n".join(line for line in lines if not line.lstrip().startswith("#"))))
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


def check_compose_probes(report: Report, resolved: Mapping[str, Any], routes: Routes) -> None:
    for name, service in SERVICE_OF.items():
        test = " ".join(resolved["services"][name].get("healthcheck", {}).get("test", []))
        for probe in PROBE_PATH.findall(test):
            if not routes.serves(service, probe):
                report.fail(f"docker-compose.yml {name}: healthcheck probes {probe}, not a route of the service")
    report.notes.append("compose, Dockerfile and Kubernetes probe paths are routes of the apps")


def check_env_example(report: Report) -> None:
    for problem in env_example.problems(env_example.ENV_EXAMPLE.read_text(encoding="utf-8")):
        report.fail(problem)
    report.notes.append(f"{len(env_example.parse(env_example.ENV_EXAMPLE.read_text(encoding='utf-8')))} variables")
