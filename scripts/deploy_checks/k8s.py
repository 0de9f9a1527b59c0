"""deploy/k8s: strict schemas, and the manifests against each other, the settings classes and the routes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import env_example

from deploy_checks.common import (
    K8S_DIR,
    K8S_VERSIONS,
    OUR_IMAGES,
    SECRET_NAME,
    THIRD_PARTY_ENV,
    THIRD_PARTY_PROBES,
    Report,
    Routes,
    containers,
    image_repository,
    k8s_documents,
    pod_spec,
)


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


def check_k8s_shape(report: Report, routes: Routes) -> None:  # noqa: C901 - one list of cross-checks
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
        # securityContext, resources and probes as such are checkov's rules (.checkov.yaml).
        for container in containers(spec):
            where = f"{path.name} {name}/{container['name']}"
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
                if SECRET_NAME.search(variable["name"]) and "value" in variable:
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
    report.notes.append(f"{len(workloads)} workloads: probe routes, references, the expected resources")


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
