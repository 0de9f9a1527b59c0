"""Render and check the top-level .env.example from the services' settings classes.

    uv run --no-sync python scripts/env_example.py --write   # regenerate .env.example + compose env blocks
    uv run --no-sync python scripts/env_example.py --check   # fail on anything undocumented or stale

Every variable either service reads comes from its pydantic-settings class (the shared
``ContractSettings`` fields plus each service's own), with the default and description the class
declares, grouped by the section comments of the class source. Variables that both services read
with a different meaning or default (``API_KEY``, ``MAX_REQUEST_BYTES``) are documented once per
service as ``INGESTION_<NAME>`` / ``RETRIEVAL_<NAME>``: docker-compose.yml forks each into the
service's own ``<NAME>``. The deployment's own variables (MinIO, published ports, the optional
profiles) are listed in :data:`DEPLOYMENT_VARS`. ``--write`` also rewrites the blocks of
docker-compose.yml between ``# >>> name`` and ``# <<< name``: the environment each service gets.

Format of .env.example: ``NAME=value`` is a line to fill in (required), ``#NAME=default`` an
optional variable shown with its default, ``# text`` a comment. ``--check`` compares names both
ways and the documented defaults with the classes'.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import re
import sys
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import AliasChoices, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV_EXAMPLE = REPO_ROOT / ".env.example"
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"

Service = Literal["ingestion", "retrieval"]
SERVICES: tuple[Service, ...] = ("ingestion", "retrieval")
SERVICE_TITLES: dict[Service, str] = {"ingestion": "ingestion-service", "retrieval": "retrieval-agent"}
# Forked names: INGESTION_API_KEY -> ingestion-service API_KEY, RETRIEVAL_API_KEY -> retrieval-agent API_KEY.
FORK_PREFIX: dict[Service, str] = {"ingestion": "INGESTION_", "retrieval": "RETRIEVAL_"}
# Always forked, even where both classes agree: each service has its own secret.
ALWAYS_FORKED = frozenset({"API_KEY"})

# How docker-compose.yml sets a settings variable, where it does not simply pass ${NAME:-} through
# (an empty value means the class default, as the classes ignore empty variables).
# Fixed by compose (whatever .env says); None: not passed at all.
COMPOSE_FIXED: dict[str, tuple[str | None, str]] = {
    "HOST": ("0.0.0.0", "docker-compose.yml sets 0.0.0.0."),
    "PORT": (
        "8000",
        "docker-compose.yml sets 8000 inside the container (published as INGESTION_PORT / RETRIEVAL_PORT).",
    ),
    "QDRANT_URI": ("http://qdrant:6333", "docker-compose.yml sets http://qdrant:6333 (its Qdrant server)."),
    "QDRANT_PATH": (
        None,
        "Not used by docker-compose.yml, which sets QDRANT_URI (the embedded engine is for `make dev`).",
    ),
    "LOCAL_MODELS_DIR": (
        "/opt/models",
        "The images bake the default models into /opt/models; docker-compose.yml sets it.",
    ),
    "S3_ENDPOINT_URL": ("http://minio:9000", "docker-compose.yml sets http://minio:9000."),
    "S3_ALLOWED_BUCKETS": ("${S3_BUCKET:-openwebui}", "docker-compose.yml sets S3_BUCKET."),
    "INGEST_STATE_DIR": (
        "/var/lib/ingestion-state",
        "docker-compose.yml keeps it on the ingestion_state volume (reindex jobs resume after a restart).",
    ),
    "MEMORY_PATH": (
        "/var/lib/memory",
        "docker-compose.yml keeps it on the memory volume (the facts and their Git history).",
    ),
}
# Required by docker-compose.yml although the class has a default.
COMPOSE_REQUIRED: dict[str, str] = {
    "S3_SECRET_ACCESS_KEY": "docker-compose.yml requires it: the minio-buckets job creates the read-only MinIO user "
    "S3_ACCESS_KEY_ID with this password (at least 8 characters) for the ingestion-service.",
}
# A default of docker-compose.yml's own, in place of the class's.
COMPOSE_DEFAULTS: dict[str, tuple[str, str]] = {
    "S3_ACCESS_KEY_ID": ("ingestion-service", "The read-only MinIO user the minio-buckets job creates."),
    "ORIGINALS_BUCKET": (
        "rag-originals",
        "docker-compose.yml keeps originals in MinIO: the minio-buckets job creates this bucket and lets "
        "S3_ACCESS_KEY_ID write to it (its only writable bucket).",
    ),
}
# Said next to a forked variable, which goes to the top of the file.
FORK_NOTES: dict[str, str] = {
    "INGESTION_API_KEY": "Also Open WebUI's EXTERNAL_INGESTION_API_KEY and EXTERNAL_DOCUMENT_LOADER_API_KEY. "
    "Generate one with: openssl rand -hex 24",
    "RETRIEVAL_API_KEY": "Also Open WebUI's RAG_EXTERNAL_RETRIEVAL_API_KEY. Generate one with: openssl rand -hex 24",
}


@dataclass(frozen=True)
class DeploymentVar:
    """A variable docker-compose.yml reads that no settings class does."""

    name: str
    default: str | None  # None: required (compose stops with an error naming it)
    description: str
    group: str


_CORE = "Deployment: secrets and endpoints (docker-compose.yml)"
_WEBUI = "Profiles webui and webui-fork: Open WebUI"
_AGENT = "Profile agent: LiteLLM proxy"
_OBS = "Profile observability: Prometheus"
DEPLOYMENT_VARS: tuple[DeploymentVar, ...] = (
    DeploymentVar("MINIO_ROOT_USER", "rag-admin", "MinIO's root user (the bucket job and Open WebUI use it).", _CORE),
    DeploymentVar("MINIO_ROOT_PASSWORD", None, "MinIO's root password, at least 8 characters.", _CORE),
    DeploymentVar(
        "S3_BUCKET",
        "openwebui",
        "The upload bucket: created by the minio-buckets job, the ingestion-service's S3_ALLOWED_BUCKETS, "
        "Open WebUI's S3_BUCKET_NAME.",
        _CORE,
    ),
    DeploymentVar("INGESTION_PORT", "8001", "Host port of the ingestion-service (bound to 127.0.0.1).", _CORE),
    DeploymentVar("RETRIEVAL_PORT", "8002", "Host port of the retrieval-agent (bound to 127.0.0.1).", _CORE),
    DeploymentVar("QDRANT_PORT", "6333", "Host port of Qdrant's HTTP API (bound to 127.0.0.1).", _CORE),
    DeploymentVar("MINIO_PORT", "9000", "Host port of MinIO's S3 API (bound to 127.0.0.1).", _CORE),
    DeploymentVar(
        "OPEN_WEBUI_IMAGE",
        "ghcr.io/open-webui/open-webui:v0.12.4",
        "Stock Open WebUI: reads every upload through the ingestion-service's document loader; with "
        "LOADER_INDEX_UPLOADS=true and the Function in integrations/open-webui/ its chats use our search.",
        _WEBUI,
    ),
    DeploymentVar(
        "OPEN_WEBUI_FORK_IMAGE",
        "aarhusai/open-webui:v0.9.6-external-rag",
        "The AarhusAI fork of Open WebUI v0.9.6 (profile webui-fork): build it from aarhusai-docker's "
        "patches/v0.9.6 and tag it so, or put its pinned tag here.",
        _WEBUI,
    ),
    DeploymentVar("WEBUI_FORK_PORT", "3001", "Host port of the fork's Open WebUI (bound to 127.0.0.1).", _WEBUI),
    DeploymentVar("WEBUI_PORT", "3000", "Host port of Open WebUI (bound to 127.0.0.1).", _WEBUI),
    DeploymentVar(
        "WEBUI_SECRET_KEY",
        "",
        "Open WebUI's session-signing secret; empty: Open WebUI generates one and keeps it on its data "
        "volume (docker-compose.yml sets WEBUI_SECRET_KEY_FILE=/app/backend/data/.webui_secret_key; by "
        "default it would stay in the container and change whenever the container is recreated).",
        _WEBUI,
    ),
    DeploymentVar("OPENAI_API_BASE_URL", "http://litellm:4000/v1", "Open WebUI's chat model endpoint.", _WEBUI),
    DeploymentVar(
        "OPENAI_API_KEY", "", "Key for OPENAI_API_BASE_URL (the LiteLLM master key with the agent profile).", _WEBUI
    ),
    DeploymentVar(
        "LITELLM_MASTER_KEY",
        "",
        "The proxy's admin key (starts with sk-); set it before exposing the proxy. Give the retrieval-agent "
        "AGENT_API_KEY=<this> and AGENT_API_BASE_URL=http://litellm:4000 to route query generation through it.",
        _AGENT,
    ),
    DeploymentVar(
        "LITELLM_UPSTREAM_API_BASE",
        "https://api.openai.com/v1",
        "Where deploy/litellm/config.yaml sends the models (any OpenAI-compatible endpoint).",
        _AGENT,
    ),
    DeploymentVar("LITELLM_UPSTREAM_API_KEY", "", "Key for LITELLM_UPSTREAM_API_BASE.", _AGENT),
    DeploymentVar("PROMETHEUS_PORT", "9090", "Host port of Prometheus (bound to 127.0.0.1).", _OBS),
)


@dataclass(frozen=True)
class SettingVar:
    """One environment variable a settings class reads."""

    name: str  # the variable as documented (forked names carry the service prefix)
    setting: str  # the name the class reads
    services: tuple[Service, ...]
    field: FieldInfo
    section: str
    aliases: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.field.is_required()

    @property
    def default_text(self) -> str:
        return render_default(self.field)

    @property
    def documented_required(self) -> bool:
        """Whether .env.example asks for it (the class or docker-compose.yml requires it)."""
        return self.required or self.name in COMPOSE_REQUIRED

    @property
    def documented_default(self) -> str:
        """The default .env.example shows: docker-compose.yml's own where it has one, else the class's."""
        return COMPOSE_DEFAULTS[self.name][0] if self.name in COMPOSE_DEFAULTS else self.default_text


def settings_classes() -> dict[Service, type[BaseSettings]]:
    """The two services' classes (import here: only the workspace's environment has them)."""
    from ingestion_service.settings import Settings as IngestionSettings
    from retrieval_agent.settings import Settings as RetrievalSettings

    return {"ingestion": IngestionSettings, "retrieval": RetrievalSettings}


def contract_class() -> type[BaseSettings]:
    from shared_contract.settings import ContractSettings

    return ContractSettings


def env_names(cls: type[BaseSettings], field_name: str) -> tuple[str, ...]:
    """The variables that set ``field_name`` (the first is the canonical one), upper-case."""
    prefix = str(cls.model_config.get("env_prefix", "") or "")
    field = cls.model_fields[field_name]
    alias = field.validation_alias
    names: list[str] = []
    if isinstance(alias, AliasChoices):
        names = [choice for choice in alias.choices if isinstance(choice, str)]
    elif isinstance(alias, str):
        names = [alias]
    elif field.alias is not None:
        names = [field.alias]
    if not names:
        names = [prefix + field_name]
    return tuple(dict.fromkeys(name.upper() for name in names))


def read_names(cls: type[BaseSettings]) -> dict[str, str]:
    """Every variable ``cls`` reads (aliases included) -> its field name."""
    return {name: field for field in cls.model_fields for name in env_names(cls, field)}


def _sections(classes: Iterable[type[BaseSettings]]) -> dict[tuple[type[BaseSettings], str], str]:
    """(class, field) -> the first line of the section comment above it in the source of the settings
    group that declares it ("" when none). A service's class composes groups, so its fields are
    declared in its bases."""
    found: dict[tuple[type[BaseSettings], str], str] = {}
    field_line = re.compile(r"^    (\w+)\s*:")
    for cls in classes:
        for group in cls.__mro__:
            if not issubclass(group, BaseSettings) or group is BaseSettings:
                continue
            heading = ""
            previous = ""
            for line in inspect.getsource(group).splitlines():
                comment = re.match(r"^    # (.+)$", line)
                if comment and not previous.strip():
                    heading = re.split(r":|;| \(", comment.group(1).strip(), maxsplit=1)[0].rstrip(".")
                match = field_line.match(line)
                if match and match.group(1) in cls.model_fields:
                    found.setdefault((cls, match.group(1)), heading)
                previous = line
    return found


def render_default(field: FieldInfo) -> str:
    """The default as it would be written in the environment ("" for none)."""
    if field.is_required() or field.default_factory is not None:
        return ""
    value = field.default
    if value is None or value is PydanticUndefined:
        return ""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    # One line per variable in .env.example: a multi-line default is shown escaped.
    return str(value).replace("\n", "\\n")


def _choices(field: FieldInfo) -> list[str]:
    annotation: Any = field.annotation
    if get_origin(annotation) is Literal:
        return [str(arg) for arg in get_args(annotation)]
    for arg in get_args(annotation):
        if get_origin(arg) is Literal:
            return [str(choice) for choice in get_args(arg)]
    return []


def collect() -> list[SettingVar]:
    """Every settings variable, as .env.example documents it (shared, per service, forked)."""
    classes = settings_classes()
    contract = contract_class()
    sections = _sections([contract, *classes.values()])
    contract_fields = set(contract.model_fields)
    out: list[SettingVar] = []
    for field_name in contract.model_fields:
        names = env_names(contract, field_name)
        section = sections.get((contract, field_name), "") or "Shared contract"
        out.append(
            SettingVar(
                names[0],
                names[0],
                SERVICES,
                contract.model_fields[field_name],
                f"Shared contract: {section}",
                names[1:],
            )
        )
    own = {service: [f for f in cls.model_fields if f not in contract_fields] for service, cls in classes.items()}
    both = set(own["ingestion"]) & set(own["retrieval"])
    emitted: set[str] = set()
    for service, cls in classes.items():
        for field_name in own[service]:
            field = cls.model_fields[field_name]
            names = env_names(cls, field_name)
            section = sections.get((cls, field_name), "")
            if field_name in both:
                other = classes["retrieval" if service == "ingestion" else "ingestion"].model_fields[field_name]
                forked = names[0] in ALWAYS_FORKED or render_default(field) != render_default(other)
                if not forked:
                    if names[0] not in emitted:
                        emitted.add(names[0])
                        out.append(SettingVar(names[0], names[0], SERVICES, field, "Both services", names[1:]))
                    continue
                name = FORK_PREFIX[service] + names[0]
                title = _CORE if name in FORK_NOTES else f"{SERVICE_TITLES[service]}: {section or 'Server'}"
                out.append(SettingVar(name, names[0], (service,), field, title))
                continue
            # What compose requires goes to the top, with the other secrets.
            title = _CORE if names[0] in COMPOSE_REQUIRED else f"{SERVICE_TITLES[service]}: {section or 'General'}"
            out.append(SettingVar(names[0], names[0], (service,), field, title, names[1:]))
    return out


def _comment(text: str) -> list[str]:
    return [f"# {line}" for line in textwrap.wrap(text, width=100)]


def _setting_lines(var: SettingVar) -> list[str]:
    lines: list[str] = []
    description = (var.field.description or "").strip()
    notes: list[str] = []
    if description:
        notes.append(description if description.endswith(".") else description + ".")
    choices = _choices(var.field)
    if choices:
        notes.append("One of: " + ", ".join(choices) + ".")
    if var.field.default_factory is not None:
        notes.append("Default: computed at start-up (see the description).")
    if var.name != var.setting:
        notes.append(f"docker-compose.yml passes it to the {SERVICE_TITLES[var.services[0]]} as {var.setting}.")
    if var.aliases:
        notes.append("Also read under the older name " + ", ".join(var.aliases) + ".")
    if var.name in FORK_NOTES:
        notes.append(FORK_NOTES[var.name])
    if var.setting in COMPOSE_FIXED:
        notes.append(COMPOSE_FIXED[var.setting][1])
    if var.name in COMPOSE_REQUIRED:
        notes.append(COMPOSE_REQUIRED[var.name])
    if var.name in COMPOSE_DEFAULTS:
        notes.append(f"{COMPOSE_DEFAULTS[var.name][1]} (The service's own default: {var.default_text or 'unset'}.)")
    if notes:
        lines += _comment(" ".join(notes))
    if var.documented_required:
        lines += _comment("Required.")
        lines.append(f"{var.name}=")
    else:
        lines.append(f"#{var.name}={var.documented_default}")
    return lines


def _deployment_lines(var: DeploymentVar) -> list[str]:
    lines = _comment(var.description)
    if var.default is None:
        lines += _comment("Required.")
        lines.append(f"{var.name}=")
    else:
        lines.append(f"#{var.name}={var.default}")
    return lines


HEADER = """\
# Configuration of the RAG stack (docker-compose.yml reads this file as .env).
#
#   cp .env.example .env   # then fill in the lines without a leading '#'
#
# Generated from the settings classes by `uv run --no-sync python scripts/env_example.py --write`;
# `make deploy-check` fails when this file and the classes disagree. Lines `NAME=` are required;
# `#NAME=value` lines show the default, uncomment to change it. An empty value means the default.
# Only the variables a container reads are passed to it (see docker-compose.yml).
"""


def render() -> str:
    """The full text of .env.example."""
    blocks: dict[str, list[list[str]]] = {_CORE: []}
    for var in collect():
        blocks.setdefault(var.section, []).append(_setting_lines(var))
    for deployment in DEPLOYMENT_VARS:
        blocks.setdefault(deployment.group, []).append(_deployment_lines(deployment))
    out = [HEADER]
    for title, entries in blocks.items():
        out.append(f"\n# {'=' * 98}\n# {title}\n# {'=' * 98}\n")
        out.append("\n\n".join("\n".join(entry) for entry in entries) + "\n")
    return "".join(out)


def compose_value(var: SettingVar) -> str | None:
    """What docker-compose.yml gives ``var.setting`` in the service's environment (None: not passed)."""
    if var.setting in COMPOSE_FIXED:
        return COMPOSE_FIXED[var.setting][0]
    if var.documented_required:
        return f"${{{var.name}:?{var.name} is required: see .env.example}}"
    if var.name in COMPOSE_DEFAULTS:
        return f"${{{var.name}:-{COMPOSE_DEFAULTS[var.name][0]}}}"
    return f"${{{var.name}:-}}"


def compose_environment(service: Service) -> dict[str, str]:
    """The environment docker-compose.yml must give ``service``: every variable its class reads."""
    env: dict[str, str] = {}
    for var in collect():
        if service not in var.services:
            continue
        value = compose_value(var)
        if value is not None:
            env[var.setting] = value
    return env


def compose_blocks() -> dict[str, dict[str, str]]:
    """The generated environment blocks of docker-compose.yml: shared (x-shared-env), ingestion, retrieval."""
    ingestion, retrieval = compose_environment("ingestion"), compose_environment("retrieval")
    shared = {name: value for name, value in ingestion.items() if retrieval.get(name) == value}
    return {
        "shared": shared,
        "ingestion": {name: value for name, value in ingestion.items() if name not in shared},
        "retrieval": {name: value for name, value in retrieval.items() if name not in shared},
    }


_BLOCK = re.compile(
    r"^(?P<indent> *)# >>> (?P<name>\w+):[^\n]*\n(?P<body>.*?)^(?P=indent)# <<< (?P=name)$", re.M | re.S
)


def render_compose(text: str) -> str:
    """``text`` (docker-compose.yml) with every generated block rewritten from the classes."""
    blocks = compose_blocks()

    def block(match: re.Match[str]) -> str:
        indent, name = match.group("indent"), match.group("name")
        body = "".join(f'{indent}{key}: "{value}"\n' for key, value in blocks[name].items())
        header = match.group(0).split("\n", 1)[0]
        return f"{header}\n{body}{indent}# <<< {name}"

    rendered, count = _BLOCK.subn(block, text)
    if count != len(blocks):
        raise ValueError(
            f"docker-compose.yml: expected {len(blocks)} generated blocks (# >>> name ... # <<< name), found {count}"
        )
    return rendered


_ASSIGNMENT = re.compile(r"^(#?)([A-Z][A-Z0-9_]*)=(.*)$")


def parse(text: str) -> dict[str, tuple[bool, str]]:
    """NAME -> (required, documented value) for every variable line of an .env.example."""
    found: dict[str, tuple[bool, str]] = {}
    for line in text.splitlines():
        match = _ASSIGNMENT.match(line)
        if match:
            found[match.group(2)] = (match.group(1) == "", match.group(3))
    return found


def problems(text: str) -> list[str]:
    """What is wrong with ``text`` as .env.example: undocumented, stale, wrong default or requiredness."""
    documented = parse(text)
    expected: dict[str, tuple[bool, str]] = {}
    for deployment in DEPLOYMENT_VARS:
        expected[deployment.name] = (deployment.default is None, deployment.default or "")
    for var in collect():
        expected[var.name] = (var.documented_required, var.documented_default)
    found: list[str] = []
    for name in sorted(set(expected) - set(documented)):
        found.append(f"undocumented: {name} is read by a settings class or docker-compose.yml but not in .env.example")
    for name in sorted(set(documented) - set(expected)):
        found.append(f"stale: {name} is in .env.example but no settings class or docker-compose.yml reads it")
    for name in sorted(set(documented) & set(expected)):
        (doc_required, doc_value), (exp_required, exp_value) = documented[name], expected[name]
        if doc_required != exp_required:
            state = "required" if exp_required else "optional"
            found.append(f"{name}: should be {state} ({'NAME=' if exp_required else '#NAME=default'})")
        elif not exp_required and doc_value != exp_value:
            found.append(f"{name}: documented default {doc_value!r}, the class says {exp_value!r}")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate .env.example")
    mode.add_argument("--check", action="store_true", help="exit 1 when .env.example is not true to the classes")

    parser.add_argument("--path", type=Path, default=ENV_EXAMPLE)
    args = parser.parse_args(argv)
    if args.write:
        args.path.write_text(render(), encoding="utf-8")
        compose = COMPOSE_FILE.read_text(encoding="utf-8")
        COMPOSE_FILE.write_text(render_compose(compose), encoding="utf-8")
        print(f"wrote {args.path} and the generated environment blocks of {COMPOSE_FILE.name}")
        return 0
    if not args.path.is_file():
        print(f"{args.path}: missing (run scripts/env_example.py --write)", file=sys.stderr)
        return 1
    found = problems(args.path.read_text(encoding="utf-8"))
    compose = COMPOSE_FILE.read_text(encoding="utf-8")
    if render_compose(compose) != compose:
        found.append(f"{COMPOSE_FILE.name}: the generated environment blocks differ from the settings classes")
    for problem in found:
        print(f"{args.path.name}: {problem}", file=sys.stderr)
    if found:
        print("fix: uv run --no-sync python scripts/env_example.py --write (then review the diff)", file=sys.stderr)
        return 1
    print(f"{args.path.name}: every variable documented, nothing stale ({len(parse(args.path.read_text()))} names)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
