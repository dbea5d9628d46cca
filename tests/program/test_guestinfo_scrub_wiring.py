"""Issue 37 item 2 in the real program (dev, under the SDK's mocks): every node VM's first-boot
secrets are removed from its extraConfig by a `GuestinfoScrub` of its own, once its node joined.
The scrub itself runs against the vCenter simulator (tests/vsphere/test_vcsim_guestinfo_scrub.py)."""

from __future__ import annotations

from stacks.environment.model import Environment
from stacks.tools.plan.mock_runtime import ProgramRun, contains_secret

VM = "vsphere:index/virtualMachine:VirtualMachine"
SCRUB = "pulumi-python:dynamic/vsphere:GuestinfoScrub"


def test_every_node_vm_gets_its_own_scrub_after_the_cluster_answers(dev_run: ProgramRun, dev_env: Environment) -> None:
    nodes = {
        **{node.name: ("control-plane", True) for node in dev_env.control_plane.nodes},
        **{node.name: ("gpu-workers", False) for node in dev_env.gpu_workers.nodes},
    }
    scrubs = {r.inputs["node_name"]: r for r in dev_run.by_type(SCRUB)}
    assert sorted(scrubs) == sorted(nodes)
    for name, (pool, control_plane) in nodes.items():
        scrub, vm = scrubs[name], dev_run.named(f"{pool}-{name}")
        assert vm.type == VM
        assert scrub.inputs["vm_name"] == vm.inputs["name"]
        assert scrub.inputs["control_plane"] is control_plane
        # It waits for its own VM only (no node waits on another), and for what a join needs
        # from the stack, so a waiting scrub never holds up the readiness check or the token.
        assert vm.urn in scrub.dependencies
        assert dev_run.urn_of("api-server-ready") in scrub.dependencies
        # The token is a component: depending on it means depending on what it is made of.
        token_parts = {r.urn for r in dev_run.resources if r.parent == dev_run.urn_of("join-token")}
        assert token_parts and token_parts <= set(scrub.dependencies)
        assert not any(other.urn in scrub.dependencies for other in dev_run.by_type(VM) if other.urn != vm.urn)
        assert contains_secret(scrub.inputs["kubeconfig"])
        assert scrub.inputs["timeout_seconds"] == dev_env.kubernetes.rollout_timeout_minutes * 60


def test_pvrdma_rulesets_are_open_to_the_rdma_subnet_only(dev_run: ProgramRun, dev_env: Environment) -> None:
    settings = dev_run.by_type("pulumi-python:dynamic/vsphere:PvrdmaHostSettings")
    assert len(settings) == len(dev_env.hosts)
    assert {s.inputs["allowed_network"] for s in settings} == {str(dev_env.rdma_network.subnet)}
