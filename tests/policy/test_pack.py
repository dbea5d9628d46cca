"""The pack as a whole: its wiring, the real analyzer servicer, and the real program's plan."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import struct_pb2
from pulumi.runtime import proto
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy
from pulumi_policy.policy import _PolicyAnalyzerServicer

from policy.gpucluster_policy import PACK_NAME, POLICIES, offline
from policy.gpucluster_policy._common import CONFIG_GROUP_TYPE, SWITCH_TYPE, VGPU_ATTACHMENT_TYPE, VM_TYPE
from policy.gpucluster_policy.kubernetes import containers
from stacks.environment.loader import read_stack_file
from stacks.tools.plan.command import plan_stack
from tests.stack_fixtures import fixture_stack

ROOT = Path(__file__).resolve().parents[2]
POLICY_DIR = ROOT / "policy"

EXPECTED = {
    "vgpu-vm-full-memory-reservation": StackValidationPolicy,
    "passthrough-vm-full-memory-reservation": ResourceValidationPolicy,
    "rdma-switch-single-uplink-jumbo-mtu": ResourceValidationPolicy,
    "no-privileged-containers": ResourceValidationPolicy,
    "pinned-container-images": ResourceValidationPolicy,
    "mpijob-workers-limit-gpus": ResourceValidationPolicy,
    "protected-in-prod": StackValidationPolicy,
}


def test_pack_lists_every_policy_as_mandatory() -> None:
    assert {p.name: type(p) for p in POLICIES} == EXPECTED
    assert all(p.enforcement_level == EnforcementLevel.MANDATORY for p in POLICIES)


def test_pack_project_files() -> None:
    project = yaml.safe_load((POLICY_DIR / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    prod_config = json.loads((POLICY_DIR / "policy-config.prod.json").read_text())
    assert prod_config == {"protected-in-prod": {"requireProtection": True}}
    assert set(prod_config) <= set(EXPECTED)


def test_pack_imports_the_way_pulumi_runs_it() -> None:
    """Pulumi runs the folder with runpy.run_path: the folder itself is sys.path[0]."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import gpucluster_policy as p; "
        "print(p.PACK_NAME, len(p.POLICIES))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(POLICY_DIR)], capture_output=True, text=True, cwd="/", check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [PACK_NAME, str(len(EXPECTED))]
    assert "PolicyPack(name=PACK_NAME, policies=POLICIES" in (POLICY_DIR / "__main__.py").read_text()


# --- through pulumi-policy's own analyzer servicer ---------------------------------------------


def _struct(props: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(props)
    return struct


def _servicer(config: dict[str, dict[str, Any]] | None = None) -> _PolicyAnalyzerServicer:
    servicer = _PolicyAnalyzerServicer(PACK_NAME, "0.1.0", POLICIES, EnforcementLevel.MANDATORY)
    request = proto.ConfigureAnalyzerRequest()
    for name, properties in (config or {}).items():
        request.policyConfig[name].CopyFrom(proto.PolicyConfig(properties=_struct(properties)))
    servicer.Configure(request, None)
    return servicer


def _urn(type_token: str, name: str) -> str:
    return f"urn:pulumi:prod::vsphere-gpu-cluster::{type_token}::{name}"


def test_servicer_reports_a_bad_switch_as_mandatory() -> None:
    props = {"name": "rdma", "uplinks": ["a", "b"], "maxMtu": 9000, "hosts": [{"devices": ["vmnic4"]}]}
    request = proto.AnalyzeRequest(
        type=SWITCH_TYPE, urn=_urn(SWITCH_TYPE, "rdma-switch"), name="rdma-switch", properties=_struct(props)
    )
    response = _servicer().Analyze(request, None)
    assert [(d.policyName, d.enforcementLevel) for d in response.diagnostics] == [
        ("rdma-switch-single-uplink-jumbo-mtu", proto.MANDATORY)
    ]
    assert "2 uplinks (a, b)" in response.diagnostics[0].message


def test_servicer_passes_allow_list_config_to_the_privileged_rule() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "ghcr.io/ok/img:1.0", "securityContext": {"privileged": True}}]},
    }
    request = proto.AnalyzeRequest(
        type="kubernetes:core/v1:Pod", urn=_urn("kubernetes:core/v1:Pod", "p"), name="p", properties=_struct(pod)
    )
    assert [d.policyName for d in _servicer().Analyze(request, None).diagnostics] == ["no-privileged-containers"]
    allowed = _servicer({"no-privileged-containers": {"allowPrivilegedImages": ["ghcr.io/ok/img"]}})
    assert list(allowed.Analyze(request, None).diagnostics) == []


def test_servicer_joins_vgpu_attachment_to_its_vm_and_checks_protection(monkeypatch) -> None:
    monkeypatch.setenv("PULUMI_STACK", "prod")
    vm_urn = _urn(VM_TYPE, "gpu-workers-worker-1")
    vm = proto.AnalyzerResource(
        type=VM_TYPE,
        urn=vm_urn,
        name="gpu-workers-worker-1",
        properties=_struct({"id": "4211-abc", "memory": 24576, "memoryReservation": 0}),
        options=proto.AnalyzerResourceOptions(protect=False),
    )
    attachment = proto.AnalyzerResource(
        type=VGPU_ATTACHMENT_TYPE,
        urn=_urn(VGPU_ATTACHMENT_TYPE, "gpu-workers-worker-1-vgpu"),
        name="gpu-workers-worker-1-vgpu",
        properties=_struct({"vm_id": "4211-abc", "profiles": ["grid_t4-16c"]}),
        dependencies=[vm_urn],
    )
    attachment.propertyDependencies["vm_id"].urns.append(vm_urn)
    response = _servicer().AnalyzeStack(proto.AnalyzeStackRequest(resources=[vm, attachment]), None)
    found = sorted((d.policyName, d.urn) for d in response.diagnostics)
    assert found == [
        ("protected-in-prod", vm_urn),
        ("vgpu-vm-full-memory-reservation", vm_urn),
        ("vgpu-vm-full-memory-reservation", vm_urn),
    ]


# --- over the real program's plan ---------------------------------------------------------------


@pytest.fixture(scope="module")
def dev_plan(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("plan-dev")
    plan_stack(read_stack_file(fixture_stack("dev")), stack="dev", out_dir=out)
    return json.loads((out / "resources.json").read_text())["resources"]


def _messages(violations: list[offline.Violation]) -> list[tuple[str, str]]:
    return [(v.policy, v.message) for v in violations]


def _config_group_objects(plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        obj
        for r in plan
        if r["type"] == CONFIG_GROUP_TYPE and isinstance(r["inputs"].get("objs"), list)
        for obj in r["inputs"]["objs"]
        if isinstance(obj, dict)
    ]


def _mpijob_worker_container(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]


def test_dev_plan_passes(monkeypatch, dev_plan: list[dict[str, Any]]) -> None:
    monkeypatch.setenv("PULUMI_STACK", "dev")
    types = {r["type"] for r in dev_plan}
    assert {VM_TYPE, SWITCH_TYPE, VGPU_ATTACHMENT_TYPE, CONFIG_GROUP_TYPE} <= types  # something to judge
    objects = _config_group_objects(dev_plan)
    assert sum(1 for obj in objects for _ in containers(obj)) >= 4  # device plugins, operator, jobs
    assert any(obj.get("kind") == "MPIJob" for obj in objects)
    assert _messages(offline.run(dev_plan)) == []


def test_dev_plan_judged_as_prod_fails_only_on_protection(monkeypatch, dev_plan: list[dict[str, Any]]) -> None:
    monkeypatch.setenv("PULUMI_STACK", "prod")
    violations = offline.run(dev_plan)
    assert {v.policy for v in violations} == {"protected-in-prod"}
    unprotected = {v.urn for v in violations}
    assert unprotected == {
        r["urn"] for r in dev_plan if r["type"] in (VM_TYPE, SWITCH_TYPE) or "PortGroup" in r["type"]
    }


def test_prod_plan_passes_as_prod(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PULUMI_STACK", "prod")
    plan_stack(read_stack_file(fixture_stack("prod")), stack="prod", out_dir=tmp_path)
    entries = json.loads((tmp_path / "resources.json").read_text())["resources"]
    config = json.loads((POLICY_DIR / "policy-config.prod.json").read_text())
    assert _messages(offline.run(entries, config)) == []


def test_doctored_dev_plan_fails(monkeypatch, dev_plan: list[dict[str, Any]]) -> None:
    monkeypatch.setenv("PULUMI_STACK", "dev")
    doctored = copy.deepcopy(dev_plan)
    worker = next(r for r in doctored if r["type"] == VM_TYPE and r["name"] == "gpu-workers-worker-1")
    del worker["inputs"]["memoryReservation"]
    switch = next(r for r in doctored if r["type"] == SWITCH_TYPE)
    switch["inputs"]["uplinks"] = ["uplink-rdma", "uplink-2"]
    switch["inputs"]["maxMtu"] = 1500
    objects = _config_group_objects(doctored)
    daemonset = next(obj for obj in objects if obj.get("kind") == "DaemonSet")
    daemonset["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    daemonset["spec"]["template"]["spec"]["containers"][0]["image"] = "nvcr.io/nvidia/k8s-device-plugin:latest"
    mpijob = next(obj for obj in objects if obj.get("kind") == "MPIJob")
    _mpijob_worker_container(mpijob)["resources"]["limits"].pop("nvidia.com/gpu")
    violations = offline.run(doctored)
    by_policy: dict[str, list[offline.Violation]] = {}
    for violation in violations:
        by_policy.setdefault(violation.policy, []).append(violation)
    assert set(by_policy) == {
        "vgpu-vm-full-memory-reservation",
        "passthrough-vm-full-memory-reservation",
        "rdma-switch-single-uplink-jumbo-mtu",
        "no-privileged-containers",
        "pinned-container-images",
        "mpijob-workers-limit-gpus",
    }
    assert {v.urn for v in by_policy["vgpu-vm-full-memory-reservation"]} == {worker["urn"]}
    assert {v.urn for v in by_policy["passthrough-vm-full-memory-reservation"]} == {worker["urn"]}
    assert len(by_policy["rdma-switch-single-uplink-jumbo-mtu"]) == 2
    for policy in ("no-privileged-containers", "pinned-container-images", "mpijob-workers-limit-gpus"):
        assert len(by_policy[policy]) == 1, by_policy[policy]


def _as_stack(plan: list[dict[str, Any]], stack: str) -> list[dict[str, Any]]:
    """The same plan with its URNs (`urn:pulumi:STACK::PROJECT::TYPE::NAME`) naming another stack."""
    text = json.dumps(plan).replace("urn:pulumi:dev::", f"urn:pulumi:{stack}::")
    return list(json.loads(text))


def test_offline_command_line(monkeypatch, tmp_path: Path, dev_plan: list[dict[str, Any]], capsys) -> None:
    monkeypatch.setenv("PULUMI_STACK", "dev")
    path = tmp_path / "resources.json"
    path.write_text(json.dumps({"resources": dev_plan}))
    assert offline.main([str(path)]) == 0
    assert capsys.readouterr().out.strip() == "0 violation(s)"
    # dev's (unprotected) resources planned as prod: the pack's protected-in-prod refuses them.
    prod_path = tmp_path / "prod.json"
    prod_path.write_text(json.dumps({"resources": _as_stack(dev_plan, "prod")}))
    monkeypatch.delenv("PULUMI_STACK")
    assert offline.main([str(prod_path), "--stack", "prod"]) == 1
    assert "protected-in-prod: VirtualMachine" in capsys.readouterr().out
    assert offline.main([str(prod_path)]) == 1  # the plan's own stack, when none is named
    assert "protected-in-prod: VirtualMachine" in capsys.readouterr().out
    assert offline.main([str(tmp_path / "missing.json")]) == 2


def test_offline_refuses_a_plan_of_another_stack(
    monkeypatch, tmp_path: Path, dev_plan: list[dict[str, Any]], capsys
) -> None:
    # Judging dev's plan as prod would pass or fail it by prod's rules: neither says anything true.
    monkeypatch.delenv("PULUMI_STACK", raising=False)
    path = tmp_path / "resources.json"
    path.write_text(json.dumps({"resources": dev_plan}))
    assert offline.main([str(path), "--stack", "prod"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"error: resources {path}: a plan of stack 'dev' (its URNs begin urn:pulumi:dev::), not of 'prod' "
        "(--stack prod); plan prod first (`python -m stacks plan prod --out build/plan/prod`) and give "
        "build/plan/prod/resources.json\n"
    )
    monkeypatch.setenv("PULUMI_STACK", "staging")  # what a shell left over from `pulumi stack select` may hold
    assert offline.main([str(path)]) == 2
    assert "not of 'staging' (PULUMI_STACK=staging)" in capsys.readouterr().err


def test_offline_refuses_a_plan_that_mixes_stacks(tmp_path: Path, dev_plan: list[dict[str, Any]], capsys) -> None:
    path = tmp_path / "resources.json"
    path.write_text(json.dumps({"resources": dev_plan[:3] + _as_stack(dev_plan[3:], "prod")}))
    assert offline.main([str(path)]) == 2
    assert "resources of more than one stack (dev, prod)" in capsys.readouterr().err


def test_offline_command_line_takes_a_plan_folder(
    monkeypatch, tmp_path: Path, dev_plan: list[dict[str, Any]], capsys
) -> None:
    monkeypatch.setenv("PULUMI_STACK", "dev")
    (tmp_path / "resources.json").write_text(json.dumps({"resources": dev_plan}))
    assert offline.main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "0 violation(s)"


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: d / "missing.json", "resources {path}: no such file; give the resources.json"),
        (lambda d: d, "resources {path}: is a folder, not a JSON file; give the resources.json"),
        (lambda d: _written(d / "x.json", "not json"), "resources {path}: not JSON ("),
        (lambda d: _written(d / "x.json", "[1, 2]"), "resources {path}: has no 'resources' list; give the"),
    ],
)
def test_offline_command_line_says_what_is_wrong_without_an_errno(tmp_path: Path, capsys, make, expected) -> None:
    path = make(tmp_path)
    assert offline.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: " + expected.format(path=path)), err
    assert "Errno" not in err


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
