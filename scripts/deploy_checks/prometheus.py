"""Prometheus's scrape jobs against the keys compose gives the targets they scrape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from deploy_checks.common import (
    COMPOSE_FILE,
    METRICS_KEY_ENV,
    PROMETHEUS_CONFIG,
    REFERENCE,
    Report,
    image_repository,
)


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
    return REFERENCE.findall(str(value)) if value is not None else []


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
