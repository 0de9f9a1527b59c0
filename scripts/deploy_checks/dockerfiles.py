"""Image pins everywhere, and the Dockerfiles: hadolint, checkov, and the project's own rules."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import env_example
import yaml

from deploy_checks.common import (
    DOCKERFILE_ENV,
    DOCKERFILES,
    HELM_QDRANT_VALUES,
    K8S_DIR,
    PROBE_PATH,
    REPO_ROOT,
    SERVICE_OF,
    Report,
    Routes,
    containers,
    image_problem,
    image_repository,
    k8s_documents,
    pod_spec,
    tool,
)

CHECKOV_VERSION = "3.3.30"
CHECKOV_CONFIG = REPO_ROOT / ".checkov.yaml"


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
    # A non-root USER and a HEALTHCHECK as such are checkov's rules (CKV_DOCKER_8, CKV_DOCKER_2).
    body = "\n".join(runtime.lines)
    if re.search(r"\b(torch|gcc|g\+\+|build-essential|clang|cmake)\b", body):
        report.fail(f"{title}: the runtime stage installs a compiler or torch")
    for line in runtime.lines:
        if line.upper().startswith("COPY --FROM=MODELS") and "/opt/models" not in line:
            report.fail(f"{title}: copy only /opt/models out of the models stage")
    for line in (line for line in runtime.lines if line.upper().startswith("HEALTHCHECK")):
        for probe in PROBE_PATH.findall(line):
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
    report.notes.append("multi-stage, locked, no torch/compilers at runtime, ENV names known")


def check_checkov(report: Report) -> None:
    """checkov's generic rules over deploy/k8s and the Dockerfiles, skips and reasons in .checkov.yaml.

    Run by uv in an environment of its own (``uv tool run``): checkov pins much of what the workspace
    also uses, so it stays out of uv.lock.
    """
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        raise FileNotFoundError("uv not found: checkov runs with `uv tool run`")
    command = [
        uv,
        "tool",
        "run",
        "--from",
        f"checkov=={CHECKOV_VERSION}",
        "checkov",
        "--config-file",
        str(CHECKOV_CONFIG),
    ]
    dockerfiles = [
        argument for path in DOCKERFILES.values() for argument in ("--file", str(path.relative_to(REPO_ROOT)))
    ]
    for targets in (["--directory", str(K8S_DIR.relative_to(REPO_ROOT))], dockerfiles):
        result = subprocess.run([*command, *targets], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            report.fail((result.stdout + result.stderr).strip())
    skipped = yaml.safe_load(CHECKOV_CONFIG.read_text(encoding="utf-8")).get("skip-check") or []
    report.notes.append(f"checkov {CHECKOV_VERSION}: no findings ({len(skipped)} checks skipped in .checkov.yaml)")
