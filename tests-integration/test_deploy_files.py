"""The deployment files against the settings classes: .env.example both ways, compose's environments.

No stack and no Docker: these read files and the services' settings classes only (the full static
checks, Compose CLI, hadolint and Kubernetes schemas included, are `make deploy-check`).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from ingestion_service.settings import Settings as IngestionSettings
from retrieval_agent.settings import Settings as RetrievalSettings

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = REPO_ROOT / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

import env_example  # noqa: E402 - scripts/ is not a package
from deploy_checks.prometheus import prometheus_auth_problems  # noqa: E402

ENV_EXAMPLE = REPO_ROOT / ".env.example"
COMPOSE = REPO_ROOT / "docker-compose.yml"
_LINE = re.compile(r"^#?([A-Z][A-Z0-9_]*)=", re.M)


def _class_names(cls: type[BaseSettings]) -> set[str]:
    """What pydantic-settings reads for ``cls``, computed here without the generator's code."""
    names: set[str] = set()
    for field_name, field in cls.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {str(choice).upper() for choice in alias.choices if isinstance(choice, str)}
        elif isinstance(alias, str):
            names.add(alias.upper())
        else:
            names.add(str(cls.model_config.get("env_prefix", "")).upper() + field_name.upper())
    return names


def _canonical(cls: type[BaseSettings]) -> set[str]:
    """One name per field: the first alias choice, or the field's own name."""
    names: set[str] = set()
    for field_name, field in cls.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices) and isinstance(alias.choices[0], str):
            names.add(alias.choices[0].upper())
        else:
            names.add(field_name.upper())
    return names


def test_env_example_check_passes() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "env_example.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr


def test_every_setting_is_documented_and_nothing_else() -> None:
    documented = set(_LINE.findall(ENV_EXAMPLE.read_text(encoding="utf-8")))
    services: dict[str, type[BaseSettings]] = {"INGESTION_": IngestionSettings, "RETRIEVAL_": RetrievalSettings}
    # Nothing undocumented: each field of each class under its own name, or forked with the service prefix.
    for prefix, cls in services.items():
        for name in _canonical(cls):
            assert name in documented or prefix + name in documented, f"{cls.__module__}: {name} not in .env.example"
    # Nothing stale: a name a class reads, a fork of one, or one docker-compose.yml interpolates.
    compose_text = "\n".join(
        line for line in COMPOSE.read_text(encoding="utf-8").splitlines() if not line.lstrip().startswith("#")
    )
    interpolated = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", compose_text))
    read = {f"{prefix}{name}" for prefix, cls in services.items() for name in _class_names(cls)}
    read |= _class_names(IngestionSettings) | _class_names(RetrievalSettings)
    stale = sorted(name for name in documented if name not in read and name not in interpolated)
    assert stale == []


def test_forked_keys_reach_each_service_as_api_key() -> None:
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    services = compose["services"]
    assert services["ingestion-service"]["environment"]["API_KEY"].startswith("${INGESTION_API_KEY:?")
    assert services["retrieval-agent"]["environment"]["API_KEY"].startswith("${RETRIEVAL_API_KEY:?")
    stock = services["open-webui"]["environment"]
    assert stock["EXTERNAL_DOCUMENT_LOADER_API_KEY"].startswith("${INGESTION_API_KEY")
    fork = services["open-webui-fork"]["environment"]
    assert fork["EXTERNAL_INGESTION_API_KEY"].startswith("${INGESTION_API_KEY")
    assert fork["RAG_EXTERNAL_RETRIEVAL_API_KEY"].startswith("${RETRIEVAL_API_KEY")


def test_no_open_webui_extracts_an_upload_twice() -> None:
    services = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    # Stock Open WebUI reads uploads through the loader only; the fork hands them to the ingestion
    # service, which extracts them itself, so it must not also call the loader.
    assert services["open-webui"]["environment"]["CONTENT_EXTRACTION_ENGINE"] == "external"
    assert "EXTERNAL_INGESTION_ENGINE" not in services["open-webui"]["environment"]
    assert services["open-webui-fork"]["environment"]["EXTERNAL_INGESTION_ENGINE"] == "external"
    assert "CONTENT_EXTRACTION_ENGINE" not in services["open-webui-fork"]["environment"]
    assert services["open-webui"]["image"].endswith(":v0.12.4}")


@pytest.mark.parametrize(
    ("service", "compose_name"), [("ingestion", "ingestion-service"), ("retrieval", "retrieval-agent")]
)
def test_compose_environment_is_what_the_class_reads(service: env_example.Service, compose_name: str) -> None:
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))  # anchors and merge keys resolved
    environment = compose["services"][compose_name]["environment"]
    cls = IngestionSettings if service == "ingestion" else RetrievalSettings
    assert set(environment) <= _class_names(cls)
    assert environment == env_example.compose_environment(service)


def test_check_reports_undocumented_stale_and_wrong_default() -> None:
    text = ENV_EXAMPLE.read_text(encoding="utf-8")
    assert env_example.problems(text) == []
    without = "\n".join(line for line in text.splitlines() if not line.startswith("#CHUNK_SIZE="))
    assert any("undocumented: CHUNK_SIZE" in problem for problem in env_example.problems(without))
    stale = text + "\n#NOT_A_SETTING=1\n"
    assert any("stale: NOT_A_SETTING" in problem for problem in env_example.problems(stale))
    wrong = text.replace("#CHUNK_SIZE=400", "#CHUNK_SIZE=512")
    assert any("CHUNK_SIZE: documented default '512'" in problem for problem in env_example.problems(wrong))
    optional = text.replace("\nINGESTION_API_KEY=\n", "\n#INGESTION_API_KEY=\n")
    assert any("INGESTION_API_KEY: should be required" in problem for problem in env_example.problems(optional))


def test_no_literal_secrets_in_deployment_files() -> None:
    env_text = ENV_EXAMPLE.read_text(encoding="utf-8")
    for name, value in re.findall(r"^#?([A-Z][A-Z0-9_]*(?:KEY|SECRET|PASSWORD|TOKEN))=(.*)$", env_text, re.M):
        assert value == "", f".env.example: {name} must be empty"
    secret = yaml.safe_load((REPO_ROOT / "deploy" / "k8s" / "secret.example.yaml").read_text(encoding="utf-8"))
    assert all(value == "" for value in secret["stringData"].values())


def _scrape_files() -> tuple[dict[str, Any], dict[str, Any]]:
    prometheus = yaml.safe_load((REPO_ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text(encoding="utf-8"))
    return prometheus, yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def _job(prometheus: dict[str, Any], name: str) -> dict[str, Any]:
    job: dict[str, Any] = next(job for job in prometheus["scrape_configs"] if job["job_name"] == name)
    return job


def test_every_api_protected_scrape_target_gets_its_key() -> None:
    prometheus, compose = _scrape_files()
    assert prometheus_auth_problems(prometheus, compose) == []
    # Qdrant's key is optional: its credentials file must exist whether or not QDRANT_API_KEY is set.
    assert _job(prometheus, "qdrant")["authorization"]["credentials_file"] == "/etc/prometheus/qdrant_api_key"
    assert compose["configs"]["qdrant_api_key"]["content"].startswith("${QDRANT_API_KEY:-")
    assert compose["configs"]["qdrant_api_key"]["content"] != "${QDRANT_API_KEY:-}"


@pytest.mark.parametrize("job_name", ["qdrant", "ingestion-service", "retrieval-agent"])
def test_scrape_job_without_credentials_is_caught(job_name: str) -> None:
    prometheus, compose = _scrape_files()
    del _job(prometheus, job_name)["authorization"]
    problems = prometheus_auth_problems(prometheus, compose)
    assert any(f"scrape job {job_name}:" in problem and "no credentials" in problem for problem in problems)


def test_scrape_credentials_from_the_wrong_or_missing_file_are_caught() -> None:
    prometheus, compose = _scrape_files()
    _job(prometheus, "qdrant")["authorization"]["credentials_file"] = "/run/secrets/retrieval_api_key"
    problems = prometheus_auth_problems(prometheus, compose)
    assert any("scrape job qdrant:" in problem and "not that key" in problem for problem in problems)
    prometheus, compose = _scrape_files()
    compose["services"]["prometheus"]["configs"] = []
    problems = prometheus_auth_problems(prometheus, compose)
    assert any("scrape job qdrant:" in problem and "mounts nothing" in problem for problem in problems)


def test_optional_key_from_an_environment_secret_or_empty_default_is_caught() -> None:
    # compose fails on an environment secret whose variable is unset, and mounts nothing when it is empty.
    prometheus, compose = _scrape_files()
    compose["secrets"]["qdrant_api_key"] = {"environment": "QDRANT_API_KEY"}
    compose["services"]["prometheus"]["secrets"].append("qdrant_api_key")
    compose["services"]["prometheus"]["configs"] = []
    _job(prometheus, "qdrant")["authorization"]["credentials_file"] = "/run/secrets/qdrant_api_key"
    problems = prometheus_auth_problems(prometheus, compose)
    assert any("scrape job qdrant:" in problem and "environment secret" in problem for problem in problems)
    prometheus, compose = _scrape_files()
    compose["configs"]["qdrant_api_key"]["content"] = "${QDRANT_API_KEY:-}"
    problems = prometheus_auth_problems(prometheus, compose)
    assert any("scrape job qdrant:" in problem and "can be empty" in problem for problem in problems)


def test_open_target_needs_no_credentials() -> None:
    prometheus, compose = _scrape_files()
    del compose["services"]["qdrant"]["environment"]["QDRANT__SERVICE__API_KEY"]
    del _job(prometheus, "qdrant")["authorization"]
    assert prometheus_auth_problems(prometheus, compose) == []
