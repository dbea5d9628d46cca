"""`python -m stacks clone`: pure re-derivation, collisions, the CLI, and the clone's plan vs its source's."""

from __future__ import annotations

import base64
import copy
import difflib
import json
import re
import shutil
import subprocess
import sys
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacks.environment.collisions import OtherStack, collisions, load_others, stack_files
from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, load_environment, read_stack_file
from stacks.environment.model import Environment
from stacks.tools.clone.plan import (
    CloneOptions,
    CloneRefused,
    derive_folder,
    derive_name,
    move_address,
    plan_clone,
    plan_environment,
    replace_word,
)
from stacks.tools.plan import command as plan
from tests.stack_fixtures import FIXTURE_STACKS, fixture_project_dir, fixture_stack

PROJECT = Path(__file__).resolve().parents[4]
SHIPPED_STACKS = FIXTURE_STACKS
"""The project's fixture stacks (tests/stack_fixtures.py): never the user's `Pulumi.*.yaml`, which
the documented `clone dev qa` adds to and a scale out edits (tests/test_user_stacks.py)."""
SHIPPED_FILES = {stack: fixture_stack(stack) for stack in SHIPPED_STACKS}
HOST_MAP = {f"esxi-0{i}.lab.example.com": f"esxi-1{i}.lab.example.com" for i in range(1, 5)}
QA_ARGS = [
    "dev",
    "qa",
    "--vlan",
    "177",
    "--rdma-subnet",
    "192.168.50.0/24",
    "--mgmt-subnet",
    "10.50.0.0/24",
    *(arg for old, new in HOST_MAP.items() for arg in ("--host-map", f"{old}={new}")),
]


def _view(stack: str) -> ConfigView:
    return read_stack_file(fixture_stack(stack))


def _options(**overrides: Any) -> CloneOptions:
    values: dict[str, Any] = {
        "source": "dev",
        "target": "qa",
        "vlan_id": 177,
        "rdma_subnet": IPv4Network("192.168.50.0/24"),
        "mgmt_subnet": IPv4Network("10.50.0.0/24"),
        "host_map": HOST_MAP,
    }
    values.update(overrides)
    return CloneOptions(**values)


def _clone_env(stack: str = "dev", **overrides: Any) -> tuple[dict[str, Any], list[str], list[str]]:
    view = _view(stack)
    return plan_environment(load_environment(view), view.values[ENVIRONMENT_KEY], _options(source=stack, **overrides))


# ---------------------------------------------------------------------------------------------
# Pure functions


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("dev-rdma-dvs", "qa-rdma-dvs"),
        ("k8s-api.dev.corp.example.com", "k8s-api.qa.corp.example.com"),
        ("dev", "qa"),
        ("devices", None),  # not a whole word
        ("mydev-gpu", None),
        ("gpu", None),
    ],
)
def test_replace_word(value: str, expected: str | None) -> None:
    assert replace_word(value, "dev", "qa") == expected


def test_names_without_the_source_name_get_the_new_one_in_front() -> None:
    assert derive_name("dev-gpu", "dev", "qa") == "qa-gpu"
    assert derive_name("gpu", "dev", "qa") == "qa-gpu"
    assert derive_folder("gpu-cluster/dev", "dev", "qa") == "gpu-cluster/qa"
    assert derive_folder("/gpu-cluster/dev-vms", "dev", "qa") == "gpu-cluster/qa-vms"
    assert derive_folder("gpu-cluster", "dev", "qa") == "gpu-cluster/qa"


@pytest.mark.parametrize(
    ("address", "old", "new", "expected"),
    [
        ("192.168.0.51", "192.168.0.0/24", "192.168.50.0/24", "192.168.50.51"),
        ("192.168.0.51", "192.168.0.0/24", "10.8.0.0/16", "10.8.0.51"),
        ("192.168.0.51", "192.168.0.0/24", "10.8.0.0/26", "10.8.0.51"),
        ("10.30.1.7", "10.30.0.0/23", "10.60.4.0/23", "10.60.5.7"),
    ],
)
def test_move_address_keeps_the_host_offset(address: str, old: str, new: str, expected: str) -> None:
    assert move_address(IPv4Address(address), IPv4Network(old), IPv4Network(new)) == IPv4Address(expected)


@pytest.mark.parametrize(
    ("address", "new"),
    [("192.168.0.101", "10.8.0.0/26"), ("192.168.0.63", "10.8.0.0/26"), ("192.168.0.64", "10.8.0.0/26")],
)
def test_move_address_refuses_an_offset_that_does_not_fit(address: str, new: str) -> None:
    with pytest.raises(ValueError, match=r"host offsets 1-62 only"):
        move_address(IPv4Address(address), IPv4Network("192.168.0.0/24"), IPv4Network(new))


def test_dev_clone_re_derives_every_unique_part_and_keeps_the_rest() -> None:
    raw, problems, _notes = _clone_env()
    assert problems == []
    env = Environment.model_validate(raw)
    dev = load_environment(_view("dev"))
    assert env.name == "qa"
    assert env.vm.name_prefix == "qa-gpu"
    assert env.vcenter.folder == "gpu-cluster/qa"
    assert (env.rdma_network.switch_name, env.rdma_network.port_group_name) == ("qa-rdma-dvs", "qa-pvrdma")
    assert env.rdma_network.vlan_id == 177
    assert env.rdma_network.subnet == IPv4Network("192.168.50.0/24")
    assert [str(h.vmknic_ip) for h in env.hosts] == [f"192.168.50.{i}" for i in range(24, 28)]
    assert [h.name for h in env.hosts] == list(HOST_MAP.values())
    assert [n.host for n in env.gpu_workers.nodes] == list(HOST_MAP.values())
    assert [str(n.rdma_ip) for n in env.gpu_workers.nodes] == [f"192.168.50.{i}" for i in range(51, 55)]
    assert [str(n.management_ip) for n in env.control_plane.nodes] == ["10.50.0.50"]
    assert env.management_network.gateway == IPv4Address("10.50.0.1")
    assert env.management_network.dns_servers == [IPv4Address("10.50.0.2")]
    # What an environment is made of stays: sizes, profiles, versions, clone mode, jobs.
    assert env.gpu_workers.model_dump(exclude={"nodes"}) == dev.gpu_workers.model_dump(exclude={"nodes"})
    assert env.control_plane.model_dump(exclude={"nodes"}) == dev.control_plane.model_dump(exclude={"nodes"})
    for same in ("kubernetes", "gpu", "rdma", "jobs", "host_graphics", "mpi_operator"):
        assert getattr(env, same) == getattr(dev, same), same
    assert env.vm.model_dump(exclude={"name_prefix"}) == dev.vm.model_dump(exclude={"name_prefix"})
    # The raw mapping keeps the source's shape: no defaults spelled out that dev does not spell out.
    assert set(raw) == set(_view("dev").values[ENVIRONMENT_KEY])


def test_staging_clone_moves_the_endpoint_name_and_resource_pool() -> None:
    raw, problems, notes = _clone_env(
        "staging", rdma_subnet=IPv4Network("192.168.31.0/24"), mgmt_subnet=IPv4Network("10.31.0.0/24"), host_map={}
    )
    assert problems == []
    assert raw["kubernetes"]["controlPlaneEndpoint"] == "k8s-api.qa.corp.example.com"
    assert raw["vcenter"]["resourcePool"] == "gpu-qa"
    # DNS servers inside the old management subnet move with it.
    assert raw["managementNetwork"]["dnsServers"] == ["10.31.0.2", "10.31.0.3"]
    assert any("resourcePool 'gpu-qa' must exist" in note for note in notes)


def test_single_control_plane_drops_the_endpoint() -> None:
    view = _view("dev")
    raw = copy.deepcopy(view.values[ENVIRONMENT_KEY])
    raw["kubernetes"]["controlPlaneEndpoint"] = "api.dev.lab.example.com"
    out, problems, notes = plan_environment(Environment.model_validate(raw), raw, _options())
    assert problems == []
    assert "controlPlaneEndpoint" not in out["kubernetes"]
    assert any("dropped" in note for note in notes)


def test_endpoint_vip_moves_and_a_foreign_name_is_refused() -> None:
    view = _view("staging")
    raw = copy.deepcopy(view.values[ENVIRONMENT_KEY])
    raw["kubernetes"]["controlPlaneEndpoint"] = "10.30.0.10"
    opts = _options(source="staging", mgmt_subnet=IPv4Network("10.31.0.0/24"), host_map={})
    out, problems, _ = plan_environment(Environment.model_validate(raw), raw, opts)
    assert problems == []
    assert out["kubernetes"]["controlPlaneEndpoint"] == "10.31.0.10"

    raw["kubernetes"]["controlPlaneEndpoint"] = "k8s-api.corp.example.com"
    _, problems, _ = plan_environment(Environment.model_validate(raw), raw, opts)
    assert problems == [
        f"{ENVIRONMENT_KEY}.kubernetes.controlPlaneEndpoint: 'k8s-api.corp.example.com' does not contain 'staging' "
        "to replace, and the new cluster must not use staging's API endpoint: pass --control-plane-endpoint "
        "(a load-balanced DNS name or VIP)"
    ]


def test_every_address_that_does_not_fit_is_reported_at_once() -> None:
    _, problems, _ = _clone_env(rdma_subnet=IPv4Network("192.168.50.0/26"))
    # Hosts .24-.27 fit a /26 (offsets 1-62); workers .51-.54 fit too; nothing refused.
    assert problems == []
    _, problems, _ = _clone_env(rdma_subnet=IPv4Network("192.168.50.0/27"), mgmt_subnet=IPv4Network("10.50.0.0/27"))
    keys = [p.split(":", 2)[1] for p in problems]
    assert keys == [
        "environment.controlPlane.nodes[0].managementIp",
        *(f"environment.gpuWorkers.nodes[{j}].{key}" for j in range(4) for key in ("managementIp", "rdmaIp")),
    ]
    assert "cannot move to --mgmt-subnet 10.50.0.0/27: 10.10.0.50 is host 50 of 10.10.0.0/24" in problems[0]


def test_unknown_host_in_the_host_map_is_refused() -> None:
    _, problems, _ = _clone_env(host_map={"esxi-99.lab.example.com": "esxi-x"})
    assert problems == [
        "--host-map esxi-99.lab.example.com: not a host of Pulumi.dev.yaml (its hosts: " + ", ".join(HOST_MAP) + ")"
    ]


def test_plan_clone_drops_secrets_and_lists_them() -> None:
    values = copy.deepcopy(dict(_view("dev").values))
    values[ENVIRONMENT_KEY]["kubernetes"]["mode"] = "existing"  # the mode that reads the kubeconfig secret
    view = ConfigView(values=values, secret_keys=frozenset({"ops:alertWebhookToken", "vsphere-gpu-cluster:kubeconfig"}))
    plan = plan_clone(view, load_environment(view), _options())
    assert "ops:alertWebhookToken" not in plan.config
    assert plan.secrets_to_set == ["ops:alertWebhookToken", "vsphere-gpu-cluster:kubeconfig"]
    assert plan.config["vsphere:vsphereServer"] == "vcenter.lab.example.com"


def test_plan_clone_raises_with_every_problem() -> None:
    view = _view("dev")
    with pytest.raises(CloneRefused) as refused:
        plan_clone(view, load_environment(view), _options(rdma_subnet=IPv4Network("192.168.50.0/28")))
    assert len(refused.value.problems) == 8  # 4 vmknics + 4 workers


# ---------------------------------------------------------------------------------------------
# Collisions with the other stack files


def _others() -> list[OtherStack]:
    others, problems = load_others(SHIPPED_FILES, exclude=set())
    assert problems == []
    return others


def _collisions_of(**overrides: Any) -> list[str]:
    raw, problems, _ = _clone_env(**overrides)
    assert problems == []
    return collisions("Pulumi.qa.yaml", Environment.model_validate(raw), "vcenter.lab.example.com", _others())


def test_a_clean_clone_collides_with_nothing() -> None:
    assert _collisions_of() == []


def test_same_switch_and_vlan_is_refused_naming_both_files_and_keys() -> None:
    found = _collisions_of(switch_name="dev-rdma-dvs", port_group_name="dev-pvrdma", vlan_id=0)
    prefix = f"Pulumi.qa.yaml {ENVIRONMENT_KEY}.rdmaNetwork"
    assert found == [
        f"{prefix}.switchName: collides with Pulumi.dev.yaml: switch 'dev-rdma-dvs' is already used; pass --switch-name",
        f"{prefix}.portGroupName: collides with Pulumi.dev.yaml: port group 'dev-pvrdma' on switch 'dev-rdma-dvs' "
        "already exists; pass --port-group-name",
        f"{prefix}.vlanId: collides with Pulumi.dev.yaml: VLAN 0 on switch 'dev-rdma-dvs' is already used; "
        "pass another --vlan",
    ]


def test_overlapping_subnet_on_the_same_vcenter_is_refused() -> None:
    found = _collisions_of(rdma_subnet=IPv4Network("192.168.0.0/23"))
    assert found == [
        f"Pulumi.qa.yaml {ENVIRONMENT_KEY}.rdmaNetwork.subnet: collides with Pulumi.dev.yaml: 192.168.0.0/23 "
        "overlaps rdmaNetwork.subnet 192.168.0.0/24 on the same vCenter; pass another --rdma-subnet"
    ]


def test_overlap_with_an_environment_on_another_vcenter_is_fine() -> None:
    # staging and prod live on their own vCenters; dev's subnets are no concern of theirs.
    raw, problems, _ = _clone_env(mgmt_subnet=IPv4Network("10.30.0.0/24"), rdma_subnet=IPv4Network("192.168.40.0/24"))
    assert problems == []
    env = Environment.model_validate(raw)
    assert collisions("Pulumi.qa.yaml", env, "vcenter.lab.example.com", _others()) == []
    found = collisions("Pulumi.qa.yaml", env, "vcenter-staging.corp.example.com", _others())
    assert [f.split(": ")[1] for f in found] == ["collides with Pulumi.staging.yaml"]


def test_same_esxi_hosts_are_refused() -> None:
    found = _collisions_of(host_map={})
    assert len(found) == 8
    assert found[0] == (
        f"Pulumi.qa.yaml {ENVIRONMENT_KEY}.gpuWorkers.nodes[0].host: collides with Pulumi.dev.yaml: ESXi host "
        "'esxi-01.lab.example.com' is already claimed by gpuWorkers.nodes[0] (strict vm-host-rules placement); "
        "map it to another host with --host-map OLD=NEW"
    )
    assert all("collides with Pulumi.dev.yaml" in f for f in found)
    assert sum("rdmaVmnics" in f for f in found) == 4


def test_management_macs_that_would_repeat_on_one_network_are_refused() -> None:
    # MACs carry the low 21 bits of the address: 10.42.0.x and 10.10.0.x agree in them.
    found = _collisions_of(mgmt_subnet=IPv4Network("10.42.0.0/24"))
    assert len(found) == 5
    assert "10.42.0.50 gets MAC 00:50:56:0a:00:32, the MAC of controlPlane.nodes[0] (10.10.0.50)" in found[0]


def test_a_broken_other_stack_file_blocks_the_check(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.other.yaml").write_text("config:\n  vsphere-gpu-cluster:environment: {name: x}\n")
    others, problems = load_others(stack_files(tmp_path), exclude=set())
    assert others == []
    assert problems == [
        "Pulumi.other.yaml: not a valid environment, so a clone cannot be checked against it; "
        "fix it first (`python -m stacks validate other`)"
    ]


# ---------------------------------------------------------------------------------------------
# The command line, as a user runs it


def _project(tmp_path: Path) -> Path:
    for path in SHIPPED_FILES.values():
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stacks", "clone", *args],
        cwd=fixture_project_dir(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_writes_a_valid_stack_file(tmp_path: Path) -> None:
    project = _project(tmp_path)
    result = _run(*QA_ARGS, "--dir", str(project))
    assert result.returncode == 0, result.stderr
    written = project / "Pulumi.qa.yaml"
    text = written.read_text()
    assert text.startswith("# qa: cloned from Pulumi.dev.yaml by\n#   python -m stacks clone dev qa --vlan 177")
    env = load_environment(read_stack_file(written))
    assert env.name == "qa"
    assert "rdmaNetwork.vlanId: 0 -> 177" in result.stdout
    # and the new stack is now one of the others: a second clone with the same options collides with it
    again = _run(*[a if a != "qa" else "qa2" for a in QA_ARGS], "--dir", str(project))
    assert again.returncode == 2
    assert "collides with Pulumi.qa.yaml" in again.stderr
    assert "Traceback" not in again.stderr


def test_cli_refuses_a_colliding_clone_with_every_reason(tmp_path: Path) -> None:
    project = _project(tmp_path)
    result = _run(
        "dev",
        "qa",
        "--vlan",
        "0",
        "--rdma-subnet",
        "192.168.0.0/24",
        "--mgmt-subnet",
        "10.10.0.0/24",
        "--switch-name",
        "dev-rdma-dvs",
        "--dir",
        str(project),
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    for key in ("switchName", "vlanId", "rdmaNetwork.subnet", "managementNetwork.subnet"):
        assert f"{key}: collides with Pulumi.dev.yaml" in result.stderr, key
    assert "environment.hosts: 4 ESXi host(s) of Pulumi.dev.yaml are in use by Pulumi.dev.yaml" in result.stderr
    assert not (project / "Pulumi.qa.yaml").exists()


def test_cli_names_the_hosts_to_map_in_one_line_with_the_whole_command(tmp_path: Path) -> None:
    """Without --host-map every host of dev collides twice (its vmnic, its pinned worker): eight
    findings used to say "map it with --host-map" one at a time."""
    project = _project(tmp_path)
    args = ["dev", "qa", "--vlan", "177", "--rdma-subnet", "192.168.50.0/24", "--mgmt-subnet", "10.50.0.0/24"]
    partly = [*args, "--host-map", "esxi-01.lab.example.com=esxi-11.lab.example.com"]
    result = _run(*partly, "--dir", str(project))
    assert result.returncode == 2
    problems = result.stderr.splitlines()[:-1]
    assert len(problems) == 1, result.stderr
    [line] = problems
    command = line.split("; run: ", 1)[1]
    assert command == (
        "python -m stacks clone " + " ".join(partly) + " --host-map esxi-02.lab.example.com=NEW-HOST-1"
        " --host-map esxi-03.lab.example.com=NEW-HOST-2 --host-map esxi-04.lab.example.com=NEW-HOST-3"
        f" --dir {project}"
    )
    # The command as printed, with the placeholders filled in, writes the clone.
    filled = command.split()[4:]
    filled = [a.replace("NEW-HOST-", "esxi-2") + (".lab.example.com" if "NEW-HOST-" in a else "") for a in filled]
    assert _run(*filled).returncode == 0
    assert (project / "Pulumi.qa.yaml").exists()


def test_cli_never_copies_secrets_and_prints_what_to_set(tmp_path: Path) -> None:
    project = _project(tmp_path)
    source = yaml.safe_load((project / "Pulumi.dev.yaml").read_text())
    source["encryptionsalt"] = "v1:dev-salt"
    source["config"]["ops:alertWebhookToken"] = {"secure": "v1:DEV-CIPHERTEXT"}
    (project / "Pulumi.dev.yaml").write_text(yaml.safe_dump(source, sort_keys=False))
    result = _run(*QA_ARGS, "--dir", str(project))
    assert result.returncode == 0, result.stderr
    text = (project / "Pulumi.qa.yaml").read_text()
    assert "DEV-CIPHERTEXT" not in text
    assert "dev-salt" not in text  # dev's encryption settings belong to dev
    assert "pulumi config set --secret --stack qa ops:alertWebhookToken" in result.stdout
    assert "pulumi stack init qa --copy-config-from dev" in result.stdout


def test_cli_refuses_to_overwrite_without_force_and_keeps_the_targets_own_secrets(tmp_path: Path) -> None:
    project = _project(tmp_path)
    source = yaml.safe_load((project / "Pulumi.dev.yaml").read_text())
    source["config"]["ops:alertWebhookToken"] = {"secure": "v1:DEV-CIPHERTEXT"}
    (project / "Pulumi.dev.yaml").write_text(yaml.safe_dump(source, sort_keys=False))
    # What `pulumi stack init qa --copy-config-from dev` leaves: dev's config, secrets re-encrypted for qa.
    copied = copy.deepcopy(source)
    copied = {"encryptionsalt": "v1:qa-salt", **copied}
    copied["config"]["ops:alertWebhookToken"] = {"secure": "v1:QA-CIPHERTEXT"}
    (project / "Pulumi.qa.yaml").write_text(yaml.safe_dump(copied, sort_keys=False))

    refused = _run(*QA_ARGS, "--dir", str(project))
    assert refused.returncode == 2
    assert "Pulumi.qa.yaml: already exists; pass --force" in refused.stderr

    result = _run(*QA_ARGS, "--copy-secrets-from", "dev", "--dir", str(project))
    assert result.returncode == 0, result.stderr
    written = yaml.safe_load((project / "Pulumi.qa.yaml").read_text())
    assert written["encryptionsalt"] == "v1:qa-salt"
    assert written["config"]["ops:alertWebhookToken"] == {"secure": "v1:QA-CIPHERTEXT"}
    assert written["config"][ENVIRONMENT_KEY]["name"] == "qa"
    assert "secrets kept from the existing Pulumi.qa.yaml" in result.stdout


def test_cli_copy_secrets_without_the_pulumi_step_explains_it(tmp_path: Path) -> None:
    project = _project(tmp_path)
    result = _run(*QA_ARGS, "--copy-secrets-from", "dev", "--dir", str(project))
    assert result.returncode == 2
    assert "first run `pulumi stack init qa --copy-config-from dev`" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["dev", "qa", "--rdma-subnet", "192.168.50.0/24", "--mgmt-subnet", "10.50.0.0/24"], "--vlan"),
        (["dev", "qa", "--vlan", "5000", "--rdma-subnet", "1/24", "--mgmt-subnet", "x"], "not a VLAN id"),
        (["dev", "qa", "--vlan", "7", "--rdma-subnet", "192.168.50.1/24", "--mgmt-subnet", "10.50.0.0/24"], "subnet"),
        (["nope", "qa", "--vlan", "7", "--rdma-subnet", "192.168.50.0/24", "--mgmt-subnet", "10.50.0.0/24"], "no such"),
        (
            ["dev", "Bad_Name", "--vlan", "7", "--rdma-subnet", "192.168.50.0/24", "--mgmt-subnet", "10.50.0.0/24"],
            "name",
        ),
        (
            [
                "dev",
                "qa",
                "--vlan",
                "7",
                "--rdma-subnet",
                "192.168.50.0/24",
                "--mgmt-subnet",
                "10.50.0.0/24",
                "--host-map",
                "esxi-01",
            ],
            "OLD=NEW",
        ),
    ],
)
def test_cli_bad_input_exits_2_without_a_traceback(tmp_path: Path, args: list[str], expected: str) -> None:
    result = _run(*args, "--dir", str(_project(tmp_path)))
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------------------------------------
# The clone's plan differs from its source's only where it should


# Leaves whose values are derived from something the clone changed and that the plan computes
# itself (ids a lookup returns for a renamed host, MACs derived from a moved address): they may
# differ, but every old value must map to one new value, and that pair must then explain every
# other place the value appears (e.g. the MAC inside a VM's base64 guestinfo metadata).
DERIVED_KEYS = {"macAddress", "hostSystemId", "hostSystemIds", "host"}
# Numbers the clone sets on purpose: key -> (dev's, qa's).
NUMBER_CHANGES = {"vlanId": (0, 177)}
_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4}){4,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")


class Translation:
    """What the clone is expected to rename in any text: dev's value -> qa's."""

    def __init__(self) -> None:
        words = {
            "gpu-cluster/dev": "gpu-cluster/qa",
            "dev-gpu": "qa-gpu",
            "dev-rdma-dvs": "qa-rdma-dvs",
            "dev-pvrdma": "qa-pvrdma",
            **HOST_MAP,
        }
        self.rules: list[tuple[re.Pattern[str], str]] = [
            (re.compile(rf"(?<![A-Za-z0-9]){re.escape(old)}(?![A-Za-z0-9])"), new) for old, new in words.items()
        ]
        # Same /24s, same host offsets: only the network part of each address changes.
        self.rules.append((re.compile(r"(?<![\d.])192\.168\.0\.(?=\d{1,3}(?![\d.]))"), "192.168.50."))
        self.rules.append((re.compile(r"(?<![\d.])10\.10\.0\.(?=\d{1,3}(?![\d.]))"), "10.50.0."))
        # The bare environment name last, never as a path segment (/dev/infiniband stays) nor as
        # iproute2's object in the bootstrap's `rdma dev set` (a command word, not the stack).
        self.rules.append((re.compile(r"(?<![A-Za-z0-9/])(?<!rdma )dev(?![A-Za-z0-9])"), "qa"))
        self.exact: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        for pattern, new in self.rules:
            text = pattern.sub(new, text)
        for old, new in self.exact.items():
            text = text.replace(old, new)
        return text


def _decode(text: str) -> str | None:
    if not _BASE64.match(text):
        return None
    try:
        return base64.b64decode(text, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


def _leaf_differences(
    before: Any, after: Any, path: str, key: str, tr: Translation, derived: dict[str, str], out: list[str]
) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        renamed = {tr(str(k)): v for k, v in before.items()}
        if set(renamed) != set(after):
            out.append(f"{path}: keys {sorted(renamed)} -> {sorted(after)}")
            return
        for k, v in renamed.items():
            _leaf_differences(v, after[k], f"{path}.{k}", k, tr, derived, out)
        return
    if isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            out.append(f"{path}: {len(before)} items -> {len(after)} items")
            return
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            _leaf_differences(b, a, f"{path}[{i}]", key, tr, derived, out)
        return
    if before == after:
        return
    if key in DERIVED_KEYS and isinstance(before, str) and isinstance(after, str):
        if derived.setdefault(before, after) != after or list(derived.values()).count(after) > 1:
            out.append(f"{path}: derived {before!r} -> {after!r} is not one-to-one")
        return
    if key in NUMBER_CHANGES and (before, after) == NUMBER_CHANGES[key]:
        return
    if isinstance(before, str) and isinstance(after, str):
        if tr(before) == after:
            return
        decoded_before, decoded_after = _decode(before), _decode(after)
        if decoded_before is not None and decoded_after is not None:
            if tr(decoded_before) == decoded_after:
                return
            lines = difflib.unified_diff(tr(decoded_before).splitlines(), decoded_after.splitlines(), lineterm="", n=0)
            out.append(f"{path} (base64; dev translated vs qa): " + " | ".join(list(lines)[2:12]))
            return
    out.append(f"{path}: {before!r} -> {after!r}")


def plan_differences(dev: dict[str, Any], qa: dict[str, Any], tr: Translation, derived: dict[str, str]) -> list[str]:
    """Every difference between two plans that the clone does not explain."""

    def keyed(doc: dict[str, Any], rename: Any) -> dict[tuple[str, str], dict[str, Any]]:
        return {(r["type"], rename(r["name"])): r for r in doc["resources"]}

    def by_urn(doc: dict[str, Any], rename: Any) -> dict[str, tuple[str, str]]:
        return {r["urn"]: (r["type"], rename(r["name"])) for r in doc["resources"]}

    same = lambda name: name  # noqa: E731
    before, after = keyed(dev, tr), keyed(qa, same)
    out: list[str] = []
    if set(before) != set(after):
        out.append(f"resources only in dev: {sorted(set(before) - set(after))}")
        out.append(f"resources only in qa: {sorted(set(after) - set(before))}")
        return out
    urn_before, urn_after = by_urn(dev, tr), by_urn(qa, same)
    for key, b in before.items():
        a = after[key]
        label = f"{key[0]} {key[1]}"
        for field in ("custom", "protect"):
            if b[field] != a[field]:
                out.append(f"{label} {field}: {b[field]!r} -> {a[field]!r}")
        if urn_before.get(b["parent"]) != urn_after.get(a["parent"]):
            out.append(f"{label} parent: {b['parent']} -> {a['parent']}")
        if sorted(urn_before.get(d, d) for d in b["dependencies"]) != sorted(
            urn_after.get(d, d) for d in a["dependencies"]
        ):
            out.append(f"{label} dependencies differ")
        _leaf_differences(b["inputs"], a["inputs"], f"{label} inputs", "", tr, derived, out)
    _leaf_differences(dev["outputs"], qa["outputs"], "outputs", "", tr, derived, out)
    return out


def _plain_inputs(result: Any) -> dict[str, Any]:
    """Unredacted inputs (secrets included: the guestinfo metadata carries addresses and MACs)."""
    return plan.resources_document(
        result.run, inputs_of=lambda r: {k: v for k, v in r.plain_inputs().items() if not k.startswith("__")}
    )


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from stacks.tools.plan.command import plan_stack  # imports the Pulumi SDK: only for these tests

    project = _project(tmp_path_factory.mktemp("project"))
    result = _run(*QA_ARGS, "--dir", str(project))
    assert result.returncode == 0, result.stderr
    qa_view = read_stack_file(project / "Pulumi.qa.yaml")
    out: dict[str, Any] = {"qa_view": qa_view, "plan_stack": plan_stack, "tmp": tmp_path_factory}
    for stack, view in (("dev", _view("dev")), ("qa", qa_view)):
        folder = tmp_path_factory.mktemp(f"plan-{stack}")
        out[f"{stack}_result"] = plan_stack(view, stack=stack, out_dir=folder)
        out[stack] = json.loads((folder / "resources.json").read_text())
    return out


def test_clone_plan_differs_from_dev_only_where_it_should(plans: dict[str, Any]) -> None:
    tr, derived = Translation(), {}
    assert plan_differences(plans["dev"], plans["qa"], tr, derived) == []
    # Something changed at all (the comparison is not vacuous), and the renamed hosts' ids moved.
    assert len(plans["dev"]["resources"]) == len(plans["qa"]["resources"]) > 0
    assert any(old.startswith("00:50:56:") for old in derived)
    # The secret inputs too (guestinfo metadata: hostnames, addresses and MACs, base64 inside).
    tr.exact.update(derived)
    plain_dev, plain_qa = _plain_inputs(plans["dev_result"]), _plain_inputs(plans["qa_result"])
    assert plan_differences(plain_dev, plain_qa, tr, dict(derived)) == []


def test_plan_comparison_catches_a_change_the_clone_must_not_make(plans: dict[str, Any]) -> None:
    view: ConfigView = plans["qa_view"]
    values = copy.deepcopy(dict(view.values))
    env = values[ENVIRONMENT_KEY]
    env["gpuWorkers"]["memoryMb"] = 32768
    env["gpuWorkers"]["vgpuProfiles"] = ["grid_t4-8c"]
    folder = plans["tmp"].mktemp("plan-qa-changed")
    plans["plan_stack"](ConfigView(values=values, secret_keys=view.secret_keys), stack="qa", out_dir=folder)
    changed = json.loads((folder / "resources.json").read_text())
    found = plan_differences(plans["dev"], changed, Translation(), {})
    assert any(".memory: 24576 -> 32768" in line for line in found), found
    assert any(".profiles[0]: 'grid_t4-16c' -> 'grid_t4-8c'" in line for line in found), found


def test_cli_hosts_file_and_dry_run(tmp_path: Path) -> None:
    project = _project(tmp_path)
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("".join(f"esxi-stg-0{i}.corp.example.com: esxi-perf-0{i}.corp.example.com\n" for i in range(1, 9)))
    args = ["staging", "perf", "--vlan", "131", "--rdma-subnet", "192.168.31.0/24", "--mgmt-subnet", "10.31.0.0/24"]
    result = _run(*args, "--hosts", str(hosts), "--dry-run", "--dir", str(project))
    assert result.returncode == 0, result.stderr
    assert not (project / "Pulumi.perf.yaml").exists()
    document = yaml.safe_load(result.stdout.split("\n  name: staging -> perf")[0])
    env = load_environment(ConfigView(values=document["config"]))
    assert [n.host for n in env.gpu_workers.nodes] == [f"esxi-perf-0{i}.corp.example.com" for i in range(1, 9)]
    assert env.kubernetes.control_plane_endpoint == "k8s-api.perf.corp.example.com"
    assert env.vcenter.resource_pool == "gpu-perf"
    assert "note: vcenter.resourcePool 'gpu-perf' must exist" in result.stdout
