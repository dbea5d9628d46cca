"""Issue 37 item 2 in the real program (dev, under the SDK's mocks): every node VM's first-boot
secrets are removed from its extraConfig by a `GuestinfoScrub` of its own, once its guest has read
them (it reports its node's hostname), or when that wait times out: not after the join (issue 40
item 6). The scrub runs against the vCenter simulator (tests/components/vsphere/test_vcsim_guestinfo_scrub.py),
the wait against the Kubernetes API double (tests/components/k8s/join/test_node_joined.py)."""

from __future__ import annotations

from stacks.environment.model import Environment
from stacks.tools.plan.mock_runtime import ProgramRun, contains_secret

VM = "vsphere:index/virtualMachine:VirtualMachine"
SCRUB = "gpucluster:vsphere:GuestinfoScrub"
JOINED = "gpucluster:kubernetes:NodeJoined"


def test_every_node_vm_gets_its_own_scrub_once_its_node_joined(dev_run: ProgramRun, dev_env: Environment) -> None:
    nodes = {
        **{node.name: ("control-plane", True) for node in dev_env.control_plane.nodes},
        **{node.name: ("gpu-workers", False) for node in dev_env.gpu_workers.nodes},
    }
    scrubs = {r.inputs["node_name"]: r for r in dev_run.by_type(SCRUB)}
    waits = {r.inputs["node_name"]: r for r in dev_run.by_type(JOINED)}
    assert sorted(scrubs) == sorted(waits) == sorted(nodes)
    token_parts = {r.urn for r in dev_run.resources if r.parent == dev_run.urn_of("join-token")}
    for name, (pool, control_plane) in nodes.items():
        scrub, wait, vm = scrubs[name], waits[name], dev_run.named(f"{pool}-{name}")
        assert vm.type == VM
        # The scrub takes the keys out of this VM only, once its guest has read them, whether
        # or not the node ever joins (issue 40 item 6): it does not wait for the join.
        assert scrub.inputs["vm_name"] == vm.inputs["name"]
        assert scrub.property_dependencies["vm_id"] == [vm.urn]
        assert set(scrub.resource_dependencies) == {vm.urn}
        assert wait.urn not in scrub.dependencies
        assert scrub.inputs["host_name"] == name
        assert scrub.inputs["wait_seconds"] == dev_env.kubernetes.rollout_timeout_minutes * 60
        # The wait is for this VM's node (a replaced VM has a new id: a new wait), after the
        # readiness check and the join token, so a waiting node never holds up what a join needs.
        assert wait.property_dependencies["vm_id"] == [vm.urn]
        assert wait.inputs["control_plane"] is control_plane
        assert vm.urn in wait.dependencies
        assert dev_run.urn_of("api-server-ready") in wait.dependencies
        assert token_parts and token_parts <= set(wait.dependencies)
        assert not any(other.urn in wait.dependencies for other in dev_run.by_type(VM) if other.urn != vm.urn)
        assert contains_secret(wait.inputs["kubeconfig"])
        assert wait.inputs["timeout_seconds"] == dev_env.kubernetes.rollout_timeout_minutes * 60


def test_pvrdma_rulesets_are_open_to_the_rdma_subnet_only(dev_run: ProgramRun, dev_env: Environment) -> None:
    settings = dev_run.by_type("gpucluster:vsphere:PvrdmaHostSettings")
    assert len(settings) == len(dev_env.hosts)
    assert {s.inputs["allowed_network"] for s in settings} == {str(dev_env.rdma_network.subnet)}
