"""`python -m stacks validate|plan|schema` as a user runs it: a child process in the project folder."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stacks.environment.loader import ENVIRONMENT_KEY, KUBECONFIG_KEY, read_stack_file
from stacks.tools.plan.command import SECRET_PLACEHOLDER, plan_stack
from stacks.tools.plan.mock_runtime import SECRET_MARK, contains_secret
from tests.stack_fixtures import fixture_stack

Cli = Callable[..., subprocess.CompletedProcess[str]]

RDMA_FABRIC = "rdma (gpucluster:vsphere:RdmaFabric)"
GPU_WORKERS = "gpu-workers (gpucluster:vsphere:NodePool)"
CONTROL_PLANE = "control-plane (gpucluster:vsphere:NodePool)"


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr


# --- validate -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stack", "facts"),
    [
        ("dev", ["4 GPU hosts", "1 control-plane + 4 GPU worker VMs", "RDMA 192.168.0.0/24 (VLAN 0)"]),
        ("staging", ["8 GPU hosts", "3 control-plane + 8 GPU worker VMs", "(VLAN 130)"]),
        ("prod", ["16 GPU hosts", "3 control-plane + 16 GPU worker VMs", "(VLAN 140)"]),
    ],
)
def test_validate_good_stack_prints_one_summary_line(cli: Cli, stack: str, facts: list[str]) -> None:
    result = cli("validate", stack)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    [line] = result.stdout.splitlines()
    assert line.startswith(f"Pulumi.{stack}.yaml: valid: environment '{stack}', ")
    for fact in facts:
        assert fact in line


@pytest.mark.parametrize("how", ["stack name", "--file"])
def test_validate_missing_stack_file_is_one_line(cli: Cli, tmp_path: Path, how: str) -> None:
    if how == "stack name":
        result, missing = cli("validate", "nosuch"), "Pulumi.nosuch.yaml"
    else:
        result, missing = cli("validate", "x", "--file", tmp_path / "gone.yaml"), str(tmp_path / "gone.yaml")
    no_traceback(result)
    assert result.returncode == 2
    assert result.stdout == ""
    problem, summary = result.stderr.splitlines()
    assert f"{missing}: no such stack file; " in problem
    if how == "stack name":  # the stacks that do exist, so a typo is one look away
        assert "the stacks in " in problem and "dev, " in problem
    else:
        assert problem.endswith("create it with `pulumi stack init` or pass --file")
    assert summary == "1 problem(s) found"


def test_validate_without_a_stack_is_a_usage_error(cli: Cli) -> None:
    result = cli("validate")
    no_traceback(result)
    assert result.returncode == 2
    assert "usage: python -m stacks validate" in result.stderr


# --- schema ---------------------------------------------------------------------------------------


def _property_names(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            yield from node["properties"]
        for value in node.values():
            yield from _property_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from _property_names(value)


@pytest.fixture(scope="module")
def schema_text(cli: Cli) -> str:
    result = cli("schema")
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_schema_uses_the_stack_files_camel_case_names(schema_text: str) -> None:
    schema = json.loads(schema_text)
    assert schema["title"].startswith(ENVIRONMENT_KEY)
    assert {"rdmaNetwork", "managementNetwork", "controlPlane", "gpuWorkers", "hosts"} <= set(schema["properties"])
    assert set(schema["required"]) >= {"name", "vcenter", "vm", "hosts", "rdmaNetwork", "gpuWorkers"}
    names = set(_property_names(schema))
    assert {"vmknicMtu", "vlanId", "rdmaVmnics", "managementIp", "vgpuProfiles", "slotsPerWorker"} <= names
    assert not [name for name in names if "_" in name]
    assert schema["additionalProperties"] is False


def test_schema_describes_options_with_their_docstrings(schema_text: str) -> None:
    schema = json.loads(schema_text)
    placement = schema["$defs"]["WorkerPool"]["properties"]["placement"]
    assert placement["default"] == "vm-host-rules"
    assert "one per host" in placement["description"]


def test_committed_schema_is_current(root: Path, schema_text: str) -> None:
    committed = root / "schema" / "environment.schema.json"
    assert committed.read_text() == schema_text, (
        "schema/environment.schema.json is stale: run `python -m stacks schema --out schema/environment.schema.json`"
    )


def test_schema_accepts_the_good_stacks_and_rejects_unknown_keys(root: Path, schema_text: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads(schema_text))
    for stack in ("dev", "staging", "prod", "sim"):
        environment = read_stack_file(fixture_stack(stack)).values[ENVIRONMENT_KEY]
        assert list(validator.iter_errors(environment)) == [], stack
    environment = read_stack_file(fixture_stack("dev")).values[ENVIRONMENT_KEY]
    typo = {**environment, "rdmaNetwork": {**environment["rdmaNetwork"], "vlanID": 5}}
    [error] = validator.iter_errors(typo)
    assert list(error.path) == ["rdmaNetwork"]
    assert "vlanID" in error.message


# --- plan -----------------------------------------------------------------------------------------


def tree_block(tree: str, header: str) -> list[str]:
    """The lines printed under `header` in the plan's component tree, de-indented."""
    lines = tree.splitlines()
    [start] = [i for i, line in enumerate(lines) if line.strip() == header]
    depth = len(lines[start]) - len(lines[start].lstrip())
    block = []
    for line in lines[start + 1 :]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        block.append(line.strip())
    return block


@pytest.fixture(scope="module")
def dev_plan(cli: Cli, tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("plan-dev")
    return cli("plan", "dev", "--out", out, "--graph", out / "g.dot", "--graph-order"), out


def test_plan_writes_resources_json(dev_plan: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    result, out = dev_plan
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    document = json.loads((out / "resources.json").read_text())
    resources = document["resources"]
    assert resources
    for entry in resources:
        assert {"urn", "type", "name", "parent", "custom", "dependencies", "inputs"} <= set(entry)
    switches = [r for r in resources if r["type"] == "vsphere:index/distributedVirtualSwitch:DistributedVirtualSwitch"]
    assert [s["inputs"]["name"] for s in switches] == ["dev-rdma-dvs"]
    assert switches[0]["inputs"]["maxMtu"] == 9000  # written as the user wrote it, not 9000.0
    assert f"wrote {out / 'resources.json'}" in result.stdout


def test_plan_tree_names_the_components_with_counts(dev_plan: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    result, _ = dev_plan
    tree = result.stdout
    fabric = tree_block(tree, RDMA_FABRIC)
    assert "1 x vsphere:index/distributedVirtualSwitch:DistributedVirtualSwitch" in fabric
    assert "1 x vsphere:index/distributedPortGroup:DistributedPortGroup" in fabric
    assert "4 x vsphere:index/vnic:Vnic" in fabric
    assert "4 x gpucluster:vsphere:PvrdmaHostSettings" in fabric
    workers = tree_block(tree, GPU_WORKERS)
    assert "4 x vsphere:index/virtualMachine:VirtualMachine" in workers
    assert "4 x gpucluster:vsphere:VgpuAttachment" in workers
    assert "4 x vsphere:index/computeClusterVmHostRule:ComputeClusterVmHostRule" in workers
    assert "1 x vsphere:index/virtualMachine:VirtualMachine" in tree_block(tree, CONTROL_PLANE)
    assert re.search(r"^total: \d+ resources \(\d+ custom resources \+ \d+ components\), ", tree, re.MULTILINE)


def test_plan_graph_is_a_dot_digraph_of_components(dev_plan: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    result, out = dev_plan
    dot = (out / "g.dot").read_text()
    assert dot.startswith("digraph ")
    assert dot.rstrip().endswith("}")
    ids = dict(re.findall(r'^\s+(n\d+) \[label="([^"]+?)(?:\\n\+[^"]*)?"[^\]]*\];$', dot, re.MULTILINE))
    by_label = {label: node for node, label in ids.items()}
    workers, fabric = by_label["gpu-workers\\nNodePool: 4 VMs"], by_label["rdma\\nRdmaFabric"]
    assert f"  {fabric} -> {workers};" in dot.splitlines()  # the workers' PVRDMA NICs wait on the port group
    assert f"wrote {out / 'g.dot'}" in result.stdout


def test_plan_of_a_broken_stack_writes_nothing(cli: Cli, root: Path, tmp_path: Path) -> None:
    broken = root / "tests" / "stacks" / "environment" / "corpus" / "broken" / "two-rdma-vmnics.yaml"
    result = cli("plan", "broken", "--file", broken, "--out", tmp_path / "out")
    no_traceback(result)
    assert result.returncode == 2
    assert result.stderr.startswith(f"{ENVIRONMENT_KEY}.hosts[2].rdmaVmnics: ")
    assert not (tmp_path / "out").exists()


# --- secrets in plans -------------------------------------------------------------------------------


def _stack_with_secrets(root: Path, folder: Path) -> Path:
    text = (fixture_stack("dev")).read_text()
    for old, new in [
        (
            "  vsphere-gpu-cluster:environment:\n",
            f"  {KUBECONFIG_KEY}:\n    secure: v1:BBBBBBBBBBBBBBBB\n  vsphere-gpu-cluster:environment:\n",
        ),
        ("      mode: bootstrap\n", "      mode: existing\n"),
    ]:
        assert text.count(old) == 1
        text = text.replace(old, new)
    path = folder / "Pulumi.secret.yaml"
    path.write_text(text)
    return path


def _files_containing(folder: Path, needle: str) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file() and needle.encode() in path.read_bytes()]


def test_plan_never_writes_a_secret_value(cli: Cli, root: Path, tmp_path: Path) -> None:
    stack = _stack_with_secrets(root, tmp_path)
    out = tmp_path / "plan"

    result = cli("plan", "secret", "--file", stack, "--out", out, "--graph", out / "g.dot")

    assert result.returncode == 0, result.stderr
    assert _files_containing(out, SECRET_PLACEHOLDER) == []
    assert SECRET_PLACEHOLDER not in result.stdout + result.stderr
    assert _files_containing(out, f'"{SECRET_MARK}"') == [out / "resources.json"]
    vms = [
        r
        for r in json.loads((out / "resources.json").read_text())["resources"]
        if r["type"] == "vsphere:index/virtualMachine:VirtualMachine"
    ]
    assert len(vms) == 5
    assert {vm["inputs"]["extraConfig"] for vm in vms} == {SECRET_MARK}


def test_plan_stack_keeps_a_known_secret_out_of_every_file(root: Path, tmp_path: Path) -> None:
    known = "KNOWN-S3CRET-VALUE-123"
    view = read_stack_file(_stack_with_secrets(root, tmp_path))
    out = tmp_path / "plan"

    result = plan_stack(view, stack="secret", out_dir=out, graph_file=out / "g.dot", secret_placeholder=known)

    assert (out / "resources.json").is_file()
    assert _files_containing(out, known) == []
    # Wherever the program used a secret, the input that carries it stays marked secret.
    carriers = [
        (resource, key, value)
        for resource in result.run.resources
        for key, value in resource.inputs.items()
        if known in json.dumps(resource.plain_inputs()[key], default=str)
    ]
    assert carriers, "kubernetes.mode 'existing' should hand the kubeconfig secret to some resource"
    for resource, key, value in carriers:
        assert contains_secret(value), f"{resource.name}.{key} carries a secret in the clear"


def test_help_lists_every_command_with_what_it_does(cli: Cli) -> None:
    result = cli("--help")
    assert result.returncode == 0
    # argparse wraps the usage line once the commands outgrow it: the braces may open on the next line.
    usage = re.search(r"^usage: python -m stacks \[-h\]\s+\{([a-z,-]+)\}", result.stdout, re.MULTILINE)
    assert usage is not None, result.stdout
    for name in usage.group(1).split(","):
        assert re.search(rf"^\s+{name}\s+\S", result.stdout, re.MULTILINE), f"{name} has no help line"
    assert "validate, plan and schema" not in result.stdout
