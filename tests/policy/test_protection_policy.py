"""protected-in-prod: switch, port group and VMs protected when the stack is prod."""

from __future__ import annotations

import pytest

from policy.gpucluster_policy._common import PORT_GROUP_TYPE, SWITCH_TYPE, VM_TYPE
from policy.gpucluster_policy.protection import current_stack, protection_required, validate_protected_in_prod

FOLDER_TYPE = "vsphere:index/folder:Folder"


@pytest.fixture
def stack_resources(policy_resource):
    def make(protect: bool) -> list:
        return [
            policy_resource(SWITCH_TYPE, {"name": "prod-rdma-dvs"}, name="rdma-switch", protect=protect),
            policy_resource(PORT_GROUP_TYPE, {"name": "prod-pvrdma"}, name="rdma-pvrdma", protect=protect),
            policy_resource(VM_TYPE, {"name": "prod-gpu-worker-1"}, name="gpu-workers-worker-1", protect=protect),
            policy_resource(FOLDER_TYPE, {"path": "gpu-cluster/prod"}, name="vm-folder"),  # not required
        ]

    return make


def test_prod_stack_with_protection_passes(monkeypatch, stack_resources, stack_args, collector) -> None:
    monkeypatch.setenv("PULUMI_STACK", "prod")
    validate_protected_in_prod(stack_args(stack_resources(True)), collector)
    assert collector.reported == []


def test_prod_stack_without_protection_fails(monkeypatch, stack_resources, stack_args, collector) -> None:
    monkeypatch.setenv("PULUMI_STACK", "acme/vsphere-gpu-cluster/prod")
    resources = stack_resources(False)
    validate_protected_in_prod(stack_args(resources), collector)
    assert [urn for _, urn in collector.reported] == [r.urn for r in resources[:3]]
    assert collector.messages[0].startswith(
        "DistributedVirtualSwitch rdma-switch is not protected (stack 'prod' is one of protectedStacks ['prod'])"
    )


def test_dev_stack_needs_no_protection(monkeypatch, stack_resources, stack_args, collector) -> None:
    monkeypatch.setenv("PULUMI_STACK", "dev")
    validate_protected_in_prod(stack_args(stack_resources(False)), collector)
    assert collector.reported == []


def test_policy_config_file_requires_protection_whatever_the_stack(
    monkeypatch, stack_resources, stack_args, collector
) -> None:
    """policy/policy-config.prod.json sets requireProtection, for CLIs that do not pass the stack name."""
    monkeypatch.delenv("PULUMI_STACK", raising=False)
    validate_protected_in_prod(stack_args(stack_resources(False), {"requireProtection": True}), collector)
    assert len(collector.reported) == 3
    assert "(policy config requireProtection is true)" in collector.messages[0]


def test_explicit_config_wins_over_stack_name(monkeypatch, stack_resources, stack_args, collector) -> None:
    monkeypatch.setenv("PULUMI_STACK", "prod")
    validate_protected_in_prod(stack_args(stack_resources(False), {"requireProtection": False}), collector)
    assert collector.reported == []


def test_protected_stacks_config(monkeypatch) -> None:
    monkeypatch.setenv("PULUMI_STACK", "staging")
    assert protection_required({"protectedStacks": ["prod", "staging"]}, current_stack())[0] is True
    assert protection_required({}, current_stack())[0] is False
    monkeypatch.delenv("PULUMI_STACK")
    assert current_stack() is None
    assert protection_required({}, None)[0] is False
