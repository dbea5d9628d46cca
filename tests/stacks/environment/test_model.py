"""The environment model and the loader: what a stack file may say, and what the user is told.

Everything goes through `load_environment`, the function both `python -m stacks` and `pulumi up`
use, so these cases describe what a user sees for each mistake.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stacks.environment.loader import (
    ENVIRONMENT_KEY,
    KUBECONFIG_KEY,
    LICENSE_TOKEN_KEY,
    ConfigView,
    InvalidEnvironment,
    load_environment,
    read_stack_file,
)
from stacks.environment.model import SUPPORTED_KUBERNETES_MINORS, Environment
from tests.stack_fixtures import fixture_stack

MakeView = Callable[..., ConfigView]
P = ENVIRONMENT_KEY
OLDEST, NEWEST = SUPPORTED_KUBERNETES_MINORS.start, SUPPORTED_KUBERNETES_MINORS.stop - 1


def problems_of(view: ConfigView) -> list[str]:
    with pytest.raises(InvalidEnvironment) as raised:
        load_environment(view)
    assert str(raised.value) == "\n".join(raised.value.problems)
    return raised.value.problems


# --- the good stacks ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stack", "hosts", "control_plane", "workers", "profile", "protect"),
    [
        ("dev", 4, 1, 4, "grid_t4-16c", False),
        ("staging", 8, 3, 8, "grid_a100-40c", False),
        ("prod", 16, 3, 16, "grid_a100-40c", True),
    ],
)
def test_good_stack_validates(
    root: Path, stack: str, hosts: int, control_plane: int, workers: int, profile: str, protect: bool
) -> None:
    env = load_environment(read_stack_file(fixture_stack(stack)))
    assert env.name == stack
    assert (len(env.hosts), len(env.control_plane.nodes), len(env.gpu_workers.nodes)) == (hosts, control_plane, workers)
    assert env.gpu_workers.vgpu_profiles == [profile]
    assert env.protect is protect


def test_camel_case_keys_fill_the_snake_case_fields(dev_view: ConfigView) -> None:
    env = load_environment(dev_view)
    assert env.rdma_network.vmknic_mtu == 9000
    assert env.rdma_network.port_group_name == "dev-pvrdma"
    assert str(env.management_network.dns_servers[0]) == "10.10.0.2"
    assert env.vcenter.template_snapshot == "base"
    assert env.vm.linked_clone is True
    assert str(env.hosts[0].vmknic_ip) == "192.168.0.24"
    assert env.vm_name(env.gpu_workers.nodes[0]) == "dev-gpu-worker-1"


def test_left_out_optional_keys_take_their_documented_defaults(edited_view: MakeView) -> None:
    def strip(env: dict[str, Any]) -> None:
        for key in ("mtu", "vmknicMtu", "vlanId", "switchVersion"):
            env["rdmaNetwork"].pop(key)
        for key in ("placement", "vgpuProfiles", "memoryMb"):
            env["gpuWorkers"].pop(key)
        env.pop("kubernetes")
        env.pop("jobs")

    env = load_environment(edited_view(strip))
    assert (env.rdma_network.mtu, env.rdma_network.vmknic_mtu, env.rdma_network.vlan_id) == (9000, 9000, 0)
    assert env.rdma_network.lldp == "both"
    assert env.gpu_workers.placement == "vm-host-rules"
    assert env.gpu_workers.vgpu_profiles == ["grid_t4-16c"]
    assert env.gpu_workers.memory_mb == 24576
    assert env.gpu_workers.memory_reservation_mb is None
    assert env.kubernetes.mode == "bootstrap"
    assert env.jobs.sample.slots_per_worker == 1


def test_structured_config_as_json_string_is_read_like_yaml(dev_view: ConfigView) -> None:
    # Inside `pulumi up` the engine hands structured config over as a JSON string.
    as_json = ConfigView(
        values={**dev_view.values, P: json.dumps(dev_view.values[P])}, secret_keys=dev_view.secret_keys
    )
    assert load_environment(as_json) == load_environment(dev_view)


# --- snake_case keys ------------------------------------------------------------------------
# Stack files are camelCase only, the spelling the generated JSON Schema accepts, so an editor
# and `validate` never disagree. A snake_case key is an unknown key.


def test_snake_case_key_is_an_unknown_key(edited_view: MakeView) -> None:
    def snake(env: dict[str, Any]) -> None:
        env["vm"]["hardware_version"] = env["vm"].pop("hardwareVersion")

    [problem] = problems_of(edited_view(snake))
    assert problem.startswith(f"{P}.vm.hardware_version: unknown key; remove it or fix its spelling")


def test_both_spellings_of_one_key_is_an_error(edited_view: MakeView) -> None:
    def both(env: dict[str, Any]) -> None:
        env["vm"]["hardware_version"] = 17

    [problem] = problems_of(edited_view(both))
    assert problem.startswith(f"{P}.vm.hardware_version: unknown key; remove it or fix its spelling")


def test_environment_stored_as_a_secret_is_named_as_such() -> None:
    view = ConfigView(values={}, secret_keys=frozenset({ENVIRONMENT_KEY}))
    [problem] = problems_of(view)
    assert problem.startswith(f"{ENVIRONMENT_KEY}: stored as a secret")


# --- secrets --------------------------------------------------------------------------------


def test_secure_values_are_recorded_as_secrets_and_never_read(root: Path, tmp_path: Path) -> None:
    text = (
        (fixture_stack("dev"))
        .read_text()
        .replace(
            "  vsphere-gpu-cluster:environment:\n",
            "  vsphere-gpu-cluster:kubeconfig:\n    secure: v1:this-is-not-even-valid-ciphertext\n"
            "  vsphere-gpu-cluster:environment:\n",
        )
        .replace("      mode: bootstrap\n", "      mode: existing\n")
    )
    stack = tmp_path / "Pulumi.secret.yaml"
    stack.write_text(text)

    view = read_stack_file(stack)

    assert {KUBECONFIG_KEY} <= view.secret_keys
    assert KUBECONFIG_KEY not in view.values
    assert "v1:this-is-not-even-valid-ciphertext" not in repr(view)
    assert load_environment(view).name == "dev"


def test_a_mapping_with_more_than_secure_is_plain_config(root: Path, tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.odd.yaml"
    stack.write_text(
        (fixture_stack("dev"))
        .read_text()
        .replace(
            "  vsphere-gpu-cluster:environment:\n",
            f"  {LICENSE_TOKEN_KEY}:\n    secure: x\n    value: hunter2\n  vsphere-gpu-cluster:environment:\n",
        )
    )
    assert problems_of(read_stack_file(stack))[0] == (
        f"{LICENSE_TOKEN_KEY}: stored in plain text; remove it and run `pulumi config set --secret {LICENSE_TOKEN_KEY} <value>`"
    )


@pytest.mark.parametrize("key", [KUBECONFIG_KEY, LICENSE_TOKEN_KEY])
def test_credentials_in_plain_text_are_refused(edited_view: MakeView, key: str) -> None:
    # In the mode that reads the key, so the only problem is how it is stored.
    def reading_mode(env: dict[str, Any]) -> None:
        env["kubernetes"]["mode"] = "existing"
        env["gpu"] = {
            "mode": "gpu-operator",
            "gpuOperator": {"driverRepository": "r.example.com/nv", "driverVersion": "570.1"},
        }

    others = tuple(k for k in (KUBECONFIG_KEY, LICENSE_TOKEN_KEY) if k != key)
    assert problems_of(edited_view(reading_mode, values={key: "plain"}, secrets=others)) == [
        f"{key}: stored in plain text; remove it and run `pulumi config set --secret {key} <value>`"
    ]


@pytest.mark.parametrize(
    ("edit", "secret", "missing"),
    [
        (lambda env: env["kubernetes"].update(mode="existing"), KUBECONFIG_KEY, KUBECONFIG_KEY),
        (
            lambda env: env["gpu"].update(
                mode="gpu-operator", gpuOperator={"driverRepository": "r.example.com/nvidia", "driverVersion": "570.1"}
            ),
            LICENSE_TOKEN_KEY,
            LICENSE_TOKEN_KEY,
        ),
    ],
    ids=["existing cluster", "gpu operator"],
)
def test_modes_need_their_secret(edited_view: MakeView, edit: Any, secret: str, missing: str) -> None:
    [problem] = problems_of(edited_view(edit))
    assert problem.startswith(f"{missing}: missing;")
    assert f"pulumi config set --secret {missing}" in problem
    assert load_environment(edited_view(edit, secrets=(secret,))).name == "dev"


def test_unknown_project_key_lists_the_keys_that_exist(edited_view: MakeView) -> None:
    assert problems_of(edited_view(values={"vsphere-gpu-cluster:enviroment": {}})) == [
        "vsphere-gpu-cluster:enviroment: unknown key; this project reads only "
        f"{P}, {KUBECONFIG_KEY}, {LICENSE_TOKEN_KEY}"
    ]


def test_other_namespaces_are_not_ours_to_judge(edited_view: MakeView) -> None:
    assert load_environment(edited_view(values={"kubernetes:context": "lab", "vsphere:restSessionPath": "/tmp"}))


def test_missing_environment_says_where_to_look(edited_view: MakeView) -> None:
    assert problems_of(edited_view(drop=(P,))) == [
        f"{P}: missing; every stack describes its environment under this key (see Pulumi.dev.yaml)"
    ]


# --- field rules, table-driven ----------------------------------------------------------------


def _put(section: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda env: env.setdefault(section, {}).__setitem__(key, value)


def _node(pool: str, j: int, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda env: env[pool]["nodes"][j].__setitem__(key, value)


# (case id, edit, the one problem's key path, fragment of its message)
FIELD_ERRORS = [
    (
        "unknown key, top",
        lambda env: env.update(protected=True),
        "protected",
        "unknown key; remove it or fix its spelling",
    ),
    (
        "unknown key, nested",
        _put("vm", "cpus", 4),
        "vm.cpus",
        "see `python -m stacks schema` for the keys allowed here",
    ),
    ("unknown key, in a list", _node("controlPlane", 0, "ip", "10.10.0.9"), "controlPlane.nodes[master].ip", "unknown key"),
    (
        "missing required",
        lambda env: env["vcenter"].pop("template"),
        "vcenter.template",
        "required key is missing; add it",
    ),
    ("empty required string", _put("vcenter", "folder", ""), "vcenter.folder", "at least 1 character"),
    ("wrong type", _put("gpuWorkers", "diskGb", "big"), "gpuWorkers.diskGb", "(got 'big')"),
    ("vlan too high", _put("rdmaNetwork", "vlanId", 4095), "rdmaNetwork.vlanId", "less than or equal to 4094"),
    ("vlan negative", _put("rdmaNetwork", "vlanId", -1), "rdmaNetwork.vlanId", "greater than or equal to 0"),
    ("mtu too high", _put("rdmaNetwork", "mtu", 9001), "rdmaNetwork.mtu", "less than or equal to 9000"),
    ("mtu too low", _put("rdmaNetwork", "vmknicMtu", 1279), "rdmaNetwork.vmknicMtu", "greater than or equal to 1280"),
    ("lldp value", _put("rdmaNetwork", "lldp", "on"), "rdmaNetwork.lldp", "'listen', 'advertise', 'both' or 'none'"),
    (
        "bad address",
        _node("gpuWorkers", 1, "rdmaIp", "192.168.0"),
        "gpuWorkers.nodes[worker-2].rdmaIp",  # named: a person finds the node by its name
        "not a valid IPv4 address",
    ),
    (
        "subnet with host bits",
        _put("managementNetwork", "subnet", "10.10.0.1/24"),
        "managementNetwork.subnet",
        "not a valid IPv4 network",
    ),
    ("no DNS server", _put("managementNetwork", "dnsServers", []), "managementNetwork.dnsServers", "at least 1 item"),
    (
        "uppercase node name",
        _node("gpuWorkers", 0, "name", "Worker-1"),
        "gpuWorkers.nodes[0].name",
        "use lowercase letters, digits and '-'",
    ),
    (
        "node name with dot",
        _node("controlPlane", 0, "name", "master.lab"),
        "controlPlane.nodes[0].name",
        "not a valid name",
    ),
    ("uppercase name prefix", _put("vm", "namePrefix", "Dev"), "vm.namePrefix", "not a valid name"),
    ("hardware version 12", _put("vm", "hardwareVersion", 12), "vm.hardwareVersion", "13+ for PVRDMA"),
    ("centos 7 template", _put("vcenter", "templateOs", "centos7"), "vcenter.templateOs", "(got 'centos7')"),
    (
        "vgpu profile upper case",
        _put("gpuWorkers", "vgpuProfiles", ["GRID_T4-16C"]),
        "gpuWorkers.vgpuProfiles[0]",
        "e.g. grid_t4-16c",
    ),
    (
        "second vgpu profile bad",
        _put("gpuWorkers", "vgpuProfiles", ["grid_t4-8c", "t4-8c"]),
        "gpuWorkers.vgpuProfiles[1]",
        "'grid_' or 'nvidia_' prefix",
    ),
    ("no vgpu profile", _put("gpuWorkers", "vgpuProfiles", []), "gpuWorkers.vgpuProfiles", "at least 1 item"),
    (
        "kubernetes below oldest",
        _put("kubernetes", "version", f"1.{OLDEST - 1}.4"),
        "kubernetes.version",
        f"use 1.{OLDEST} to 1.{NEWEST}",
    ),
    (
        "kubernetes above newest",
        _put("kubernetes", "version", f"1.{NEWEST + 1}.0"),
        "kubernetes.version",
        "not supported by the bootstrap",
    ),
    (
        "kubernetes v-prefix",
        _put("kubernetes", "version", "v1.34.2"),
        "kubernetes.version",
        "write it as 1.MINOR.PATCH",
    ),
    ("kubernetes as a YAML number", _put("kubernetes", "version", 1.34), "kubernetes.version", "valid string"),
    (
        "latest image",
        _put("gpu", "devicePluginImage", "nvcr.io/nvidia/k8s-device-plugin:latest"),
        "gpu.devicePluginImage",
        "other than 'latest'",
    ),
    (
        "untagged image",
        lambda env: env["jobs"]["sample"].update(image="horovod/horovod"),
        "jobs.sample.image",
        "must be pinned",
    ),
    (
        "not a quantity",
        lambda env: env["jobs"]["sample"].update(shmSize="8GB"),
        "jobs.sample.shmSize",
        "write e.g. 8Gi",
    ),
    (
        "zero slots",
        lambda env: env["jobs"]["sample"].update(slotsPerWorker=0),
        "jobs.sample.slotsPerWorker",
        "greater than or equal to 1",
    ),
    ("mpi operator version", _put("mpiOperator", "version", "0.9.9"), "mpiOperator.version", "(got '0.9.9')"),
    (
        "calico version",
        _put("kubernetes", "cni", {"version": "3.29.3"}),
        "kubernetes.cni.version",
        "should match pattern",
    ),
    ("hosts not a list", lambda env: env.update(hosts={"esxi-01": {}}), "hosts", "valid list"),
]


@pytest.mark.parametrize(("edit", "path", "fragment"), [c[1:] for c in FIELD_ERRORS], ids=[c[0] for c in FIELD_ERRORS])
def test_field_error_names_the_key(edited_view: MakeView, edit: Any, path: str, fragment: str) -> None:
    [problem] = problems_of(edited_view(edit))
    assert problem.startswith(f"{P}.{path}: ")
    assert fragment in problem


FIELD_BOUNDARIES_ACCEPTED = [
    ("vlan 4094", _put("rdmaNetwork", "vlanId", 4094)),
    ("vmknic mtu 4192 (RoCE path MTU 4096, as the 9000 switch)", lambda env: env["rdmaNetwork"].update(vmknicMtu=4192)),
    ("hardware version 13", _put("vm", "hardwareVersion", 13)),
    ("oldest kubernetes", _put("kubernetes", "version", f"1.{OLDEST}.0")),
    ("newest kubernetes", _put("kubernetes", "version", f"1.{NEWEST}.9")),
    ("63-character node name", _node("controlPlane", 0, "name", "m" * 63)),
    ("MIG vgpu profile", _put("gpuWorkers", "vgpuProfiles", ["grid_a100-3-20c"])),
    ("nvidia_ board profile", _put("gpuWorkers", "vgpuProfiles", ["nvidia_l40s-48c"])),
    ("nvidia_ MIG profile", _put("gpuWorkers", "vgpuProfiles", ["nvidia_h100-1-10c"])),
    ("hardware version 22", _put("vm", "hardwareVersion", 22)),
    ("clone timeout 10", _put("vm", "cloneTimeoutMinutes", 10)),
    ("switch 7.0.3", _put("rdmaNetwork", "switchVersion", "7.0.3")),
    ("image by digest", _put("gpu", "devicePluginImage", "nvcr.io/nvidia/k8s-device-plugin@sha256:" + "0" * 64)),
    ("tag that starts with latest", lambda env: env["jobs"]["sample"].update(image="horovod/horovod:latest-0.28")),
    ("template os alma8", _put("vcenter", "templateOs", "alma8")),
]


@pytest.mark.parametrize(
    "edit", [c[1] for c in FIELD_BOUNDARIES_ACCEPTED], ids=[c[0] for c in FIELD_BOUNDARIES_ACCEPTED]
)
def test_values_at_the_edge_of_a_range_are_accepted(edited_view: MakeView, edit: Any) -> None:
    assert isinstance(load_environment(edited_view(edit)), Environment)


def test_field_errors_are_all_reported_together(edited_view: MakeView) -> None:
    def three(env: dict[str, Any]) -> None:
        env["rdmaNetwork"]["vlanId"] = 5000
        env["gpuWorkers"]["nodes"][3]["name"] = "W4"
        env["vcenter"].pop("datastore")

    paths = [line.split(": ", 1)[0] for line in problems_of(edited_view(three))]
    assert sorted(paths) == sorted(
        [f"{P}.rdmaNetwork.vlanId", f"{P}.gpuWorkers.nodes[3].name", f"{P}.vcenter.datastore"]
    )


# --- images from private registries, keys written twice ------------------------------------------


@pytest.mark.parametrize(
    "image",
    [
        "registry.corp.example.com:5000/nvidia/k8s-device-plugin:v0.20.0",
        "nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:" + "0" * 64,
        "localhost:5000/plugin@sha256:" + "0" * 64,
    ],
    ids=["registry with a port", "tag and digest", "port and digest"],
)
def test_pinned_images_from_private_registries_are_accepted(edited_view: MakeView, image: str) -> None:
    assert load_environment(edited_view(_put("gpu", "devicePluginImage", image))).gpu.device_plugin_image == image


@pytest.mark.parametrize(
    "image",
    ["registry.corp.example.com:5000/nvidia/k8s-device-plugin", "registry.corp.example.com:5000/plugin:latest"],
    ids=["port, no tag", "port, latest"],
)
def test_a_registry_port_is_not_a_tag(edited_view: MakeView, image: str) -> None:
    [problem] = problems_of(edited_view(_put("gpu", "devicePluginImage", image)))
    assert problem.startswith(f"{P}.gpu.devicePluginImage: ")
    assert "must be pinned" in problem


def test_a_key_written_twice_is_reported_with_its_line(root: Path, tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.twice.yaml"
    dev = (fixture_stack("dev")).read_text()
    stack.write_text(dev.replace("      vlanId: 0\n", "      vlanId: 0\n      vlanId: 130\n"))
    line = dev[: dev.index("      vlanId: 0\n")].count("\n") + 2
    with pytest.raises(InvalidEnvironment) as raised:
        read_stack_file(stack)
    [problem] = raised.value.problems
    assert problem.startswith(f"{stack}: not valid YAML at line {line}, ")
    assert "'vlanId' is written twice" in problem
