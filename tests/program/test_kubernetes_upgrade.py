"""A Kubernetes minor upgrade, planned: `kubernetes.version` one minor up on staging (1.36 -> 1.37, three
control-plane nodes) rolls every node, control plane first, between the cluster's two upgrade
steps; a skipped minor or a downgrade is refused before anything is planned.

Planned with the real program under the mock runtime (`plan --against` runs the same).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stacks.environment.loader import load_environment
from stacks.tools.plan.deploy_time.change import change_time
from stacks.tools.plan.deploy_time.durations import Durations
from stacks.tools.plan.diff import diff_plans
from stacks.tools.plan.mock_runtime import contains_secret
from tests.program.conftest import ROOT, edited_view, run_view, stack_view
from tests.stack_fixtures import fixture_stack

STAGING_ORDER = ["control-plane-cp-1", "control-plane-cp-2", "control-plane-cp-3",
                 *(f"gpu-workers-worker-{i}" for i in range(1, 9))]  # fmt: skip


def to_1_37(env: dict) -> None:  # type: ignore[type-arg]
    env["kubernetes"]["version"] = "1.37.1"


def test_one_minor_up_rolls_every_node_control_plane_first_between_the_cluster_steps() -> None:
    from stacks.tools.plan.upgrade_notes import upgrade_notes  # here: the CLI tests below run without it

    before = run_view(stack_view("staging"), "staging")
    after = run_view(edited_view("staging", to_1_37), "staging")
    notes = upgrade_notes(load_environment(stack_view("staging")), load_environment(edited_view("staging", to_1_37)))
    diff = diff_plans(before.resources, after.resources, notes)
    assert {c.node: c.verdict for c in diff.nodes} == dict.fromkeys(STAGING_ORDER, "replaced")
    assert diff.down_at_once == 1
    timed = change_time(diff, after.resources, Durations())
    assert timed.chains == [STAGING_ORDER]  # one after another, cp-1 first
    # The stored ClusterConfiguration moves before any gate (so before any VM is replaced), with the
    # etcd the new control-plane nodes join with ...
    version = after.named("cluster-version")
    assert version.inputs["version"] == "1.37.1" and version.inputs["step"] == "cluster-configuration"
    assert before.named("cluster-version").inputs["etcd_image_tag"] == "3.6.13-0"
    assert version.inputs["etcd_image_tag"] == "3.7.0-0"
    # ... after reading every etcd member's version when the minor brings a new etcd line: the step
    # holds the control-plane nodes' etcd endpoints and the etcd client certificate (its key a secret).
    staging = load_environment(stack_view("staging"))
    assert version.inputs["etcd_addresses"] == [str(n.management_ip) for n in staging.control_plane.nodes]
    assert version.inputs["etcd_client_port"] == 2379
    assert contains_secret(version.inputs["etcd_client_key_pem"])
    for node in ("cp-1", "cp-2", "cp-3", "worker-1", "worker-8"):
        gate = after.named(f"rollout-gate-{node}")
        assert version.urn in gate.dependencies
        assert gate.inputs["kubernetes_version"] == "1.37.1"
        # The control plane's generation carries its etcd tag (3.6.13-0 -> 3.7.0-0); the workers' none.
        same = before.named(f"rollout-gate-{node}").inputs["generation"] == gate.inputs["generation"]
        assert same == node.startswith("worker"), node
    # ... kube-proxy and CoreDNS once the last control-plane node is back.
    addons = after.named("cluster-addons-version")
    assert addons.inputs["step"] == "addons"
    assert after.named("rollout-settle-cp-3").urn in addons.dependencies
    [steps] = [note for note in diff.notes if note.startswith("kubernetes.version 1.36.1 -> 1.37.1")]
    in_order = [
        "1) kube-system/kubeadm-config: kubernetesVersion v1.37.1, etcd.local.imageTag 3.7.0-0",
        "etcd moves to 3.7: refused until every etcd member runs 3.6.11 or later",
        "2) control-plane nodes one at a time: cp-1, cp-2, cp-3",
        "3) kube-proxy v1.37.1 and CoreDNS v1.14.2",
        "4) GPU workers, 1 at a time: worker-1, worker-2",
    ]
    assert all(fact in steps for fact in in_order), steps
    # The templates carry the version (the bootstrap installs no packages): unchanged ones are named.
    assert any("vcenter.template and gpuTemplate are unchanged: they must carry kubeadm" in n for n in diff.notes)
    assert [steps.index(fact) for fact in in_order] == sorted(steps.index(fact) for fact in in_order)


def plan_against(tmp_path: Path, old_version: str, new_version: str, *more: str) -> subprocess.CompletedProcess[str]:
    document = yaml.safe_load((fixture_stack("dev")).read_text())
    environment = document["config"]["vsphere-gpu-cluster:environment"]
    environment["kubernetes"]["version"] = old_version
    (tmp_path / "deployed").mkdir(exist_ok=True)  # apart from the edited file: side by side they would collide
    old = tmp_path / "deployed" / "Pulumi.dev.yaml"
    old.write_text(yaml.safe_dump(document, sort_keys=False))
    environment["kubernetes"]["version"] = new_version
    new = tmp_path / "Pulumi.dev.after.yaml"
    new.write_text(yaml.safe_dump(document, sort_keys=False))
    return subprocess.run(
        [sys.executable, "-m", "stacks", *more, "dev", "--file", str(new), "--against", str(old)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.parametrize("command", [["validate"], ["plan", "--out", "OUT"]])
def test_a_two_minor_jump_is_refused_naming_the_key_and_the_fix(tmp_path: Path, command: list[str]) -> None:
    command = [str(tmp_path / "out") if part == "OUT" else part for part in command]
    result = plan_against(tmp_path, "1.33.6", "1.35.0", *command)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "kubernetes.version: 1.33.6 -> 1.35.0 skips a minor" in result.stderr
    assert "upgrade through 1.34 first" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was planned


def test_a_downgrade_is_refused(tmp_path: Path) -> None:
    result = plan_against(tmp_path, "1.34.2", "1.33.6", "validate")
    assert result.returncode == 2 and "kubernetes.version: 1.34.2 -> 1.33.6 is a downgrade" in result.stderr


def test_validate_against_accepts_one_minor(tmp_path: Path) -> None:
    result = plan_against(tmp_path, "1.34.2", "1.35.0", "validate")
    assert result.returncode == 0, result.stderr
    assert "upgrade 1.34.2 -> 1.35.0" in result.stdout
