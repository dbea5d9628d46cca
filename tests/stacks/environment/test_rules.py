"""Cross-field rules (`stacks.environment.rules.check`), table-driven on edits of dev.

Each case breaks dev in one way and lists every problem it expects: the key path (as the user
writes it in the stack file) and a fragment of the message that tells the user what to do. The
cases that must NOT produce a problem are just as important: a rule that fires on a valid
environment blocks a deploy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stacks.environment import rules
from stacks.environment.loader import ConfigView, load_environment
from stacks.environment.model import Environment
from stacks.environment.rules import format_path
from tests.stack_fixtures import fixture_stack

Edit = Callable[[dict[str, Any]], None]


def _set(*path: str | int, value: Any) -> Edit:
    def edit(env: dict[str, Any]) -> None:
        target: Any = env
        for part in path[:-1]:
            target = target[part] if isinstance(part, int) or part in target else target.setdefault(part, {})
        target[path[-1]] = value

    return edit


def _drop(*path: str | int) -> Edit:
    def edit(env: dict[str, Any]) -> None:
        target: Any = env
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]

    return edit


def _both(*edits: Edit) -> Edit:
    def edit(env: dict[str, Any]) -> None:
        for each in edits:
            each(env)

    return edit


def _add_worker(**node: Any) -> Edit:
    return lambda env: env["gpuWorkers"]["nodes"].append(node)


def _add_control_plane(*addresses: str) -> Edit:
    def edit(env: dict[str, Any]) -> None:
        for i, address in enumerate(addresses, start=2):
            env["controlPlane"]["nodes"].append({"name": f"master-{i}", "managementIp": address})

    return edit


# (case id, edit of dev, [(key path, fragment of the message that names the fix)])
BROKEN: list[tuple[str, Edit, list[tuple[str, str]]]] = [
    # admin_networks_know_the_load_balancer (issue 41 item 3)
    (
        "admin networks behind a load balancer whose sources are unknown",
        _both(
            _set("kubernetes", "controlPlaneEndpoint", value="k8s-api.dev.example.com"),
            _set("kubernetes", "nodeFirewall", value={"adminNetworks": ["172.20.0.0/16"]}),
        ),
        [("kubernetes.nodeFirewall.loadBalancerSources", "list the load balancer's source addresses")],
    ),
    # addresses_inside_their_subnets
    (
        "mgmt gateway outside",
        _set("managementNetwork", "gateway", value="10.10.9.1"),
        [("managementNetwork.gateway", "not a host address of managementNetwork.subnet 10.10.0.0/24")],
    ),
    (
        "rdma gateway outside",
        _set("rdmaNetwork", "gateway", value="192.168.9.1"),
        [("rdmaNetwork.gateway", "not a host address of rdmaNetwork.subnet 192.168.0.0/24")],
    ),
    (
        "vmknic outside",
        _set("hosts", 2, "vmknicIp", value="192.168.9.26"),
        [("hosts[2].vmknicIp", "pick one inside it")],
    ),
    (
        "mgmt address outside",
        _set("gpuWorkers", "nodes", 3, "managementIp", value="10.11.0.54"),
        [("gpuWorkers.nodes[3].managementIp", "pick one inside it")],
    ),
    (
        "rdma address outside",
        _set("gpuWorkers", "nodes", 0, "rdmaIp", value="172.16.0.51"),
        [("gpuWorkers.nodes[0].rdmaIp", "pick one inside it")],
    ),
    (
        "network address is not a host address",
        _set("controlPlane", "nodes", 0, "managementIp", value="10.10.0.0"),
        [("controlPlane.nodes[0].managementIp", "not a host address")],
    ),
    (
        "broadcast address is not a host address",
        _set("gpuWorkers", "nodes", 1, "rdmaIp", value="192.168.0.255"),
        [("gpuWorkers.nodes[1].rdmaIp", "not a host address")],
    ),
    # addresses_unique
    (
        "two workers share a management address",
        _set("gpuWorkers", "nodes", 3, "managementIp", value="10.10.0.52"),
        [("gpuWorkers.nodes[3].managementIp", "already used by gpuWorkers.nodes[1].managementIp")],
    ),
    (
        "worker rdma address is a vmknic's",
        _set("gpuWorkers", "nodes", 2, "rdmaIp", value="192.168.0.25"),
        [("gpuWorkers.nodes[2].rdmaIp", "already used by hosts[1].vmknicIp")],
    ),
    (
        "two vmknics share an address",
        _set("hosts", 3, "vmknicIp", value="192.168.0.24"),
        [("hosts[3].vmknicIp", "already used by hosts[0].vmknicIp")],
    ),
    (
        "node on the management gateway",
        _set("controlPlane", "nodes", 0, "managementIp", value="10.10.0.1"),
        [("controlPlane.nodes[0].managementIp", "is the managementNetwork.gateway; give this one its own address")],
    ),
    (
        "node on the rdma gateway",
        _both(
            _set("rdmaNetwork", "gateway", value="192.168.0.1"),
            _set("gpuWorkers", "nodes", 0, "rdmaIp", value="192.168.0.1"),
        ),
        [("gpuWorkers.nodes[0].rdmaIp", "is the rdmaNetwork.gateway")],
    ),
    # ranges_do_not_overlap
    (
        "pod range over management",
        _set("kubernetes", "podCidr", value="10.10.0.0/16"),
        [
            ("kubernetes.podCidr", "overlaps managementNetwork.subnet 10.10.0.0/24"),
            ("managementNetwork.dnsServers[0]", "exists only once the cluster runs"),
        ],
    ),
    (
        "service range over rdma",
        _set("kubernetes", "serviceCidr", value="192.168.0.0/20"),
        [("kubernetes.serviceCidr", "overlaps rdmaNetwork.subnet 192.168.0.0/24")],
    ),
    (
        "pod and service ranges overlap",
        _set("kubernetes", "serviceCidr", value="10.244.128.0/20"),
        [("kubernetes.serviceCidr", "overlaps kubernetes.podCidr 10.244.0.0/16")],
    ),
    (
        "management and rdma overlap",
        _set("managementNetwork", "subnet", value="192.168.0.0/16"),
        [
            ("managementNetwork.subnet", "must be disjoint"),
            ("managementNetwork.gateway", "not a host address"),
            ("controlPlane.nodes[0].managementIp", "pick one inside it"),
            *[(f"gpuWorkers.nodes[{j}].managementIp", "pick one inside it") for j in range(4)],
        ],
    ),
    # mtu_fits_switch
    (
        "vmknic mtu above switch",
        _set("rdmaNetwork", "mtu", value=4000),
        [
            ("rdmaNetwork.vmknicMtu", "above the switch MTU rdmaNetwork.mtu 4000; lower it or raise the switch MTU"),
            ("rdmaNetwork.mtu", "policy pack refuses"),
        ],
    ),
    # one_rdma_uplink_per_host
    (
        "teamed uplinks",
        _set("hosts", 1, "rdmaVmnics", value=["vmnic4", "vmnic5"]),
        [("hosts[1].rdmaVmnics", "PVRDMA does not support NIC teaming, so give exactly one")],
    ),
    (
        "no uplink",
        _set("hosts", 0, "rdmaVmnics", value=[]),
        [("hosts[0].rdmaVmnics", "empty; list the host's ConnectX (RoCE) vmnic")],
    ),
    # names_unique
    (
        "host listed twice",
        lambda env: env["hosts"].append(
            {"name": "esxi-02.lab.example.com", "rdmaVmnics": ["vmnic4"], "vmknicIp": "192.168.0.28"}
        ),
        [("hosts[4].name", "'esxi-02.lab.example.com' is listed twice")],
    ),
    (
        "node name in both pools",
        _set("gpuWorkers", "nodes", 2, "name", value="master"),
        [("gpuWorkers.nodes[2].name", "node names must be unique across pools")],
    ),
    (
        "node name twice in one pool",
        _set("gpuWorkers", "nodes", 3, "name", value="worker-1"),
        [("gpuWorkers.nodes[3].name", "'worker-1' is used twice")],
    ),
    # workers_placed_on_known_hosts
    (
        "worker without host",
        _drop("gpuWorkers", "nodes", 1, "host"),
        [("gpuWorkers.nodes[1].host", "every worker names the ESXi host it runs on")],
    ),
    (
        "worker on unknown host",
        _set("gpuWorkers", "nodes", 1, "host", value="esxi-99.lab.example.com"),
        [("gpuWorkers.nodes[1].host", "add it there or fix the name")],
    ),
    (
        "two workers on one host",
        _set("gpuWorkers", "nodes", 3, "host", value="esxi-02.lab.example.com"),
        [
            (
                "gpuWorkers.nodes[3].host",
                "already runs gpuWorkers.nodes[1]; strict placement allows one GPU worker per ESXi host",
            )
        ],
    ),
    (
        "fifth worker, anti-affinity",
        _both(
            _set("gpuWorkers", "placement", value="anti-affinity"),
            _add_worker(name="worker-5", managementIp="10.10.0.55", rdmaIp="192.168.0.55"),
        ),
        [("gpuWorkers.nodes", "add hosts or set placement: none")],
    ),
    (
        "fifth worker, strict placement",
        _add_worker(name="worker-5", managementIp="10.10.0.55", rdmaIp="192.168.0.55", host="esxi-01.lab.example.com"),
        [
            ("gpuWorkers.nodes[4].host", "already runs gpuWorkers.nodes[0]"),
            ("gpuWorkers.nodes", "5 workers but only 4 GPU hosts"),
        ],
    ),
    # workers_have_rdma_addresses
    (
        "worker without rdma address",
        _drop("gpuWorkers", "nodes", 2, "rdmaIp"),
        [("gpuWorkers.nodes[2].rdmaIp", "needs its address on rdmaNetwork.subnet")],
    ),
    (
        "control plane with rdma address",
        _set("controlPlane", "nodes", 0, "rdmaIp", value="192.168.0.50"),
        [("controlPlane.nodes[0].rdmaIp", "remove this key")],
    ),
    (
        "control plane pinned",
        _set("controlPlane", "nodes", 0, "host", value="esxi-01.lab.example.com"),
        [("controlPlane.nodes[0].host", "remove this key")],
    ),
    # full_memory_reservation
    (
        "partial reservation",
        _set("gpuWorkers", "memoryReservationMb", value=8192),
        [("gpuWorkers.memoryReservationMb", "vGPU VMs need all memory reserved, so remove this key")],
    ),
    # linked_clone_needs_snapshot
    (
        "linked clone, no snapshot",
        _drop("vcenter", "templateSnapshot"),
        [("vcenter.templateSnapshot", "name it here, or set vm.linkedClone: false")],
    ),
    # control_plane_quorum
    (
        "two control-plane nodes",
        _both(
            _add_control_plane("10.10.0.40"), _set("kubernetes", "controlPlaneEndpoint", value="api.lab.example.com")
        ),
        [("controlPlane.nodes", "etcd needs an odd number (1, 3 or 5)")],
    ),
    (
        "three control-plane nodes, no endpoint",
        _add_control_plane("10.10.0.40", "10.10.0.41"),
        [("kubernetes.controlPlaneEndpoint", "load-balanced DNS name or VIP")],
    ),
    (
        "three control-plane nodes behind the first one's own address",
        _both(
            _add_control_plane("10.10.0.40", "10.10.0.41"),
            _set("kubernetes", "controlPlaneEndpoint", value="10.10.0.40"),
        ),
        [("kubernetes.controlPlaneEndpoint", "10.10.0.40 is control-plane node")],
    ),
    (
        "existing cluster with three control-plane nodes: the endpoint is refused, not also demanded",
        _both(
            _set("kubernetes", "mode", value="existing"),
            _add_control_plane("10.10.0.40", "10.10.0.41"),
            _set("kubernetes", "controlPlaneEndpoint", value="api.lab.example.com"),
        ),
        [("kubernetes.controlPlaneEndpoint", "is ignored with kubernetes.mode 'existing'")],
    ),
    # mtu_fits_switch: a vmknic MTU that gives RoCE a smaller path MTU than the switch allows
    (
        "vmknic mtu 1500 under a 9000 switch",
        _set("rdmaNetwork", "vmknicMtu", value=1500),
        [("rdmaNetwork.vmknicMtu", "caps RoCE's path MTU at 1024 bytes instead of 4096")],
    ),
    # secrets_for_modes (the license token is checked by the loader, see test_model)
    (
        "gpu-operator without its settings",
        _set("gpu", "mode", value="gpu-operator"),
        [("gpu.gpuOperator", "needs driverRepository and driverVersion")],
    ),
    # slots_fit_gpus
    (
        "more ranks than vGPUs",
        _set("jobs", "sample", "slotsPerWorker", value=3),
        [("jobs.sample.slotsPerWorker", "3 ranks per worker but each worker has 1 vGPU(s); use at most 1")],
    ),
    # vgpu_profiles_exist (issue 54 item 5): names no host offers, caught offline
    (
        "L40S profile larger than the board",
        _set("gpuWorkers", "vgpuProfiles", value=["nvidia_l40s-64c"]),
        [("gpuWorkers.vgpuProfiles[0]", "NVIDIA L40S (48 GB) has no such C-series type; its types: nvidia_l40s-48c")],
    ),
    (
        "L40S profile size NVIDIA does not offer",
        _set("gpuWorkers", "vgpuProfiles", value=["nvidia_l40s-5c"]),
        [("gpuWorkers.vgpuProfiles[0]", "has no such C-series type")],
    ),
    (
        "L40S profile with the grid_ prefix",
        _set("gpuWorkers", "vgpuProfiles", value=["grid_l40s-48c"]),
        [("gpuWorkers.vgpuProfiles[0]", "listed as nvidia_l40s-..., not grid_")],
    ),
    (
        "T4 profile below the smallest C-series type",
        _set("gpuWorkers", "vgpuProfiles", value=["grid_t4-2c"]),
        [("gpuWorkers.vgpuProfiles[0]", "its types: grid_t4-16c, grid_t4-8c, grid_t4-4c")],
    ),
]

FINE: list[tuple[str, Edit]] = [
    ("rdma gateway inside", _set("rdmaNetwork", "gateway", value="192.168.0.1")),
    ("no rdma gateway", lambda env: env["rdmaNetwork"].pop("gateway", None)),
    ("vmknic mtu below switch, same RoCE path MTU", _set("rdmaNetwork", "vmknicMtu", value=4192)),
    (
        "existing cluster with three control-plane nodes, no endpoint",
        _both(
            _set("kubernetes", "mode", value="existing"),
            _add_control_plane("10.10.0.40", "10.10.0.41"),
        ),
    ),
    ("full reservation written out", _set("gpuWorkers", "memoryReservationMb", value=24576)),
    (
        "full clone without snapshot",
        _both(_set("vm", "linkedClone", value=False), _drop("vcenter", "templateSnapshot")),
    ),
    (
        "three control-plane nodes with endpoint",
        _both(
            _add_control_plane("10.10.0.40", "10.10.0.41"),
            _set("kubernetes", "controlPlaneEndpoint", value="api.lab.example.com"),
        ),
    ),
    (
        "placement none: more workers than hosts, no hosts named",
        _both(
            _set("gpuWorkers", "placement", value="none"),
            lambda env: [node.pop("host") for node in env["gpuWorkers"]["nodes"]],
            _add_worker(name="worker-5", managementIp="10.10.0.55", rdmaIp="192.168.0.55"),
        ),
    ),
    (
        "anti-affinity: workers need not name a host",
        _both(_set("gpuWorkers", "placement", value="anti-affinity"), _drop("gpuWorkers", "nodes", 0, "host")),
    ),
    (
        "two vGPUs, two ranks",
        _both(
            _set("gpuWorkers", "vgpuProfiles", value=["grid_t4-8c", "grid_t4-8c"]),
            _set("jobs", "sample", "slotsPerWorker", value=2),
        ),
    ),
    (
        "admin networks behind a load balancer whose sources are listed",
        _both(
            _set("kubernetes", "controlPlaneEndpoint", value="k8s-api.dev.example.com"),
            _set(
                "kubernetes",
                "nodeFirewall",
                value={"adminNetworks": ["172.20.0.0/16"], "loadBalancerSources": ["10.10.0.5/32"]},
            ),
        ),
    ),
    (
        "admin networks, the API at the control-plane node itself",
        _set("kubernetes", "nodeFirewall", value={"adminNetworks": ["172.20.0.0/16"]}),
    ),
    (
        "gpu-operator with its settings",
        _both(
            _set("gpu", "mode", value="gpu-operator"),
            _set(
                "gpu", "gpuOperator", value={"driverRepository": "r.example.com/nvidia", "driverVersion": "570.148.08"}
            ),
        ),
    ),
]


def _problems(env: Environment) -> list[tuple[str, str]]:
    return [(format_path("", p.path), p.message) for p in rules.check(env)]


def assert_reports(dev_raw: dict[str, Any], edit: Edit, expected: list[tuple[str, str]]) -> None:
    """`edit` of dev gives exactly the problems at `expected`'s key paths, each message naming its fix."""
    edit(dev_raw)
    problems = _problems(Environment.model_validate(dev_raw))
    assert sorted(path for path, _ in problems) == sorted(path for path, _ in expected)
    for path, fragment in expected:
        messages = [message for p, message in problems if p == path]
        assert any(fragment in message for message in messages), f"{path}: {messages}"


@pytest.mark.parametrize(("edit", "expected"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_rule_reports_the_key_and_the_fix(dev_raw: dict[str, Any], edit: Edit, expected: list[tuple[str, str]]) -> None:
    assert_reports(dev_raw, edit, expected)


@pytest.mark.parametrize("edit", [c[1] for c in FINE], ids=[c[0] for c in FINE])
def test_valid_variation_has_no_problem(dev_raw: dict[str, Any], edit: Edit) -> None:
    edit(dev_raw)
    assert _problems(Environment.model_validate(dev_raw)) == []


@pytest.mark.parametrize("stack", ["dev", "staging", "prod", "sim"])
def test_good_stacks_break_no_rule(stack: str, root: Any) -> None:
    from stacks.environment.loader import read_stack_file

    env = load_environment(read_stack_file(fixture_stack(stack)))
    assert rules.check(env) == []


def test_model_copy_edits_are_checked_like_file_edits(dev_view: ConfigView) -> None:
    env = load_environment(dev_view)
    smaller_switch = env.model_copy(update={"rdma_network": env.rdma_network.model_copy(update={"mtu": 1500})})
    policy = (
        "rdmaNetwork.mtu",
        "1500 is under 9000; RoCE needs jumbo frames and the policy pack refuses the switch (rdma-switch-single-uplink-jumbo-mtu); set 9000",
    )
    one_worker_moved = env.model_copy(
        update={
            "gpu_workers": env.gpu_workers.model_copy(
                update={
                    "nodes": [*env.gpu_workers.nodes[:3], env.gpu_workers.nodes[3].model_copy(update={"host": None})]
                }
            )
        }
    )
    assert _problems(smaller_switch) == [
        (
            "rdmaNetwork.vmknicMtu",
            "9000 is above the switch MTU rdmaNetwork.mtu 1500; lower it or raise the switch MTU",
        ),
        policy,
    ]
    assert [path for path, _ in _problems(one_worker_moved)] == ["gpuWorkers.nodes[3].host"]


def test_check_reports_every_rule_at_once(dev_raw: dict[str, Any]) -> None:
    _set("rdmaNetwork", "mtu", value=1500)(dev_raw)
    _set("hosts", 0, "rdmaVmnics", value=["vmnic4", "vmnic5"])(dev_raw)
    _set("jobs", "sample", "slotsPerWorker", value=2)(dev_raw)
    _drop("vcenter", "templateSnapshot")(dev_raw)
    paths = [path for path, _ in _problems(Environment.model_validate(dev_raw))]
    assert sorted(paths) == sorted(
        [
            "rdmaNetwork.mtu",
            "rdmaNetwork.vmknicMtu",
            "hosts[0].rdmaVmnics",
            "jobs.sample.slotsPerWorker",
            "vcenter.templateSnapshot",
        ]
    )


@pytest.mark.parametrize(
    ("root", "path", "text"),
    [
        ("env", ("hosts", 1, "vmknicIp"), "env.hosts[1].vmknicIp"),
        ("", ("hosts", 1, "vmknicIp"), "hosts[1].vmknicIp"),
        ("env", ("gpuWorkers", "nodes"), "env.gpuWorkers.nodes"),
        ("env", (), "env"),
        ("", ("vgpuProfiles", 0), "vgpuProfiles[0]"),
    ],
)
def test_key_paths_read_like_the_stack_file(root: str, path: tuple[str | int, ...], text: str) -> None:
    assert format_path(root, path) == text
