"""deploy/keda/: the manifests load, use only field names of KEDA's ScaledObject spec
(v2, keda.sh/v1alpha1) and of the three triggers' metadata, and let a scaled-in
worker drain (rule 25 with rule 23)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hailq.cli.worker import metrics_address, worker_command

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "keda"

# Written from KEDA's documentation (reference/scaledobject-spec, scalers/postgresql,
# scalers/prometheus, scalers/metrics-api).
SPEC_FIELDS = {"scaleTargetRef", "pollingInterval", "cooldownPeriod", "initialCooldownPeriod",
               "idleReplicaCount", "minReplicaCount", "maxReplicaCount", "fallback",
               "advanced", "triggers"}
SCALE_TARGET_FIELDS = {"apiVersion", "kind", "name", "envSourceContainerName"}
FALLBACK_FIELDS = {"failureThreshold", "replicas"}
TRIGGER_FIELDS = {"type", "metadata", "name", "useCachedMetrics", "authenticationRef",
                  "metricType"}
TRIGGER_METADATA = {
    "postgresql": {"connectionFromEnv", "host", "port", "userName", "passwordFromEnv",
                   "dbName", "sslmode", "query", "targetQueryValue",
                   "activationTargetQueryValue"},
    "prometheus": {"serverAddress", "query", "queryParameters", "threshold",
                   "activationThreshold", "namespace", "customHeaders", "ignoreNullValues",
                   "unsafeSsl", "timeout"},
    "metrics-api": {"url", "format", "valueLocation", "targetValue", "activationTargetValue",
                    "unsafeSsl", "authMode", "aggregateFromKubeServiceEndpoints",
                    "aggregationType"},
}
REQUIRED_METADATA = {"postgresql": {"query", "targetQueryValue"},
                     "prometheus": {"serverAddress", "query", "threshold"},
                     "metrics-api": {"url", "valueLocation", "targetValue"}}


def documents() -> list[dict[str, Any]]:
    found = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        found += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return found


def scaled_objects() -> list[dict[str, Any]]:
    return [d for d in documents() if d["kind"] == "ScaledObject"]


def worker_deployment() -> dict[str, Any]:
    return next(d for d in documents()
                if d["kind"] == "Deployment" and d["metadata"]["name"] == "claims-worker")


def test_there_is_a_scaled_object_for_each_trigger_that_fits() -> None:
    assert sorted(t["type"] for s in scaled_objects() for t in s["spec"]["triggers"]) == [
        "metrics-api", "postgresql", "prometheus"]


@pytest.mark.parametrize("scaled", scaled_objects(), ids=lambda s: s["metadata"]["name"])
def test_each_scaled_object_uses_only_keda_field_names(scaled: dict[str, Any]) -> None:
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    spec = scaled["spec"]
    assert set(spec) <= SPEC_FIELDS
    assert set(spec["scaleTargetRef"]) <= SCALE_TARGET_FIELDS
    assert spec["scaleTargetRef"]["name"] == worker_deployment()["metadata"]["name"]
    assert set(spec.get("fallback", {})) <= FALLBACK_FIELDS
    for trigger in spec["triggers"]:
        assert set(trigger) <= TRIGGER_FIELDS
        metadata = trigger["metadata"]
        assert REQUIRED_METADATA[trigger["type"]] <= set(metadata) <= TRIGGER_METADATA[
            trigger["type"]]
        assert all(isinstance(v, str) for v in metadata.values())  # KEDA wants strings


def test_each_trigger_maps_desired_workers_one_to_one() -> None:
    for scaled in scaled_objects():
        (trigger,) = scaled["spec"]["triggers"]
        metadata = trigger["metadata"]
        target = (metadata.get("targetQueryValue") or metadata.get("threshold")
                  or metadata.get("targetValue"))
        assert target == "1" and trigger.get("metricType", "AverageValue") == "AverageValue"
        assert "desired_workers" in str(metadata)


def test_the_postgresql_trigger_reads_its_connection_from_the_workers_environment() -> None:
    (scaled,) = [s for s in scaled_objects()
                 if s["spec"]["triggers"][0]["type"] == "postgresql"]
    env = {e["name"] for e in worker_deployment()["spec"]["template"]["spec"]["containers"][0]
           ["env"]}
    assert scaled["spec"]["triggers"][0]["metadata"]["connectionFromEnv"] in env


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_scale_in_drains_the_grace_period_outlasts_the_workers_grace() -> None:
    pod = worker_deployment()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    command = container["command"]
    assert command[:2] == ["hailq", "worker"]
    grace = float(option(command, "--grace"))
    assert pod["terminationGracePeriodSeconds"] > grace
    # every option given is one the worker command has
    known = {o for p in worker_command.params for o in getattr(p, "opts", [])}
    assert {a for a in command if a.startswith("--")} <= known


def test_the_probes_ask_the_worker_itself() -> None:
    (container,) = worker_deployment()["spec"]["template"]["spec"]["containers"]
    # Every interface: the kubelet's probes and Prometheus come from outside the pod, and
    # PORT alone would bind 127.0.0.1 only.
    host, port = metrics_address(option(container["command"], "--metrics-port"))
    assert host == "0.0.0.0"
    (declared,) = container["ports"]
    assert declared["containerPort"] == port
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == declared["name"]
