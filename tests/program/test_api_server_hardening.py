"""Issue 40 item 3 in the program (dev, under the SDK's mocks): the API server's hardening reaches
a running cluster. The version step writes the flags into the stored ClusterConfiguration before
any node is replaced (its provider: tests/components/k8s/upgrade/test_stored_api_server_settings.py),
and the control-plane generation carries them, so their arrival or change rolls the control plane
(only it, and only with more than one control-plane node) onto VMs that have the files and read the
flags."""

from __future__ import annotations

from typing import Any

import pytest

from components.k8s.node_bootstrap import host_files
from components.k8s.node_bootstrap.api_server import api_server_settings
from stacks.tools.plan.mock_runtime import ProgramRun
from tests.program.conftest import edited_view, run_view, stack_view

GATE = "gpucluster:kubernetes:RolloutGate"
UPGRADE = "gpucluster:kubernetes:ClusterUpgrade"


def _generations(run: ProgramRun) -> dict[str, str]:
    return {r.name.removeprefix("rollout-gate-"): r.plain_inputs().get("generation") for r in run.by_type(GATE)}


def test_the_version_step_keeps_the_api_server_settings_in_the_stored_configuration(dev_run: ProgramRun) -> None:
    [step] = [r for r in dev_run.by_type(UPGRADE) if r.name == "cluster-version"]
    assert step.plain_inputs()["api_server"] == api_server_settings()
    # Every gate (so every VM replacement) waits for it.
    for gate in dev_run.by_type(GATE):
        assert step.urn in gate.dependencies, gate.name


def _three_control_plane_nodes(env: dict[str, Any]) -> None:
    env["controlPlane"]["nodes"] = [
        {"name": "cp-1", "managementIp": "10.10.0.46"},
        {"name": "cp-2", "managementIp": "10.10.0.47"},
        {"name": "cp-3", "managementIp": "10.10.0.48"},
    ]
    env.setdefault("kubernetes", {})["controlPlaneEndpoint"] = "k8s-api.dev.example.com"


def _audit_policy_edited(monkeypatch: pytest.MonkeyPatch) -> None:
    real = host_files.host_file

    def edited(name: str) -> str:
        text = real(name)
        return text + "# one more rule\n" if name == host_files.AUDIT_POLICY else text

    monkeypatch.setattr(host_files, "host_file", edited)


def test_a_change_to_the_audit_policy_rolls_the_control_plane_only(monkeypatch: pytest.MonkeyPatch) -> None:
    view = edited_view("dev", _three_control_plane_nodes)
    before = _generations(run_view(view, "dev"))
    _audit_policy_edited(monkeypatch)
    after = _generations(run_view(view, "dev"))
    assert sorted(name for name in before if name.startswith("cp-")) == ["cp-1", "cp-2", "cp-3"]
    for name in before:
        assert (after[name] != before[name]) == name.startswith("cp-"), name


def test_a_lone_control_plane_node_is_not_rolled_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its replacement would take etcd's data with it: a new, empty cluster."""
    before = _generations(run_view(stack_view("dev"), "dev"))
    _audit_policy_edited(monkeypatch)
    assert _generations(run_view(stack_view("dev"), "dev")) == before
