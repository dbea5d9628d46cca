"""What `python -m stacks preflight` checks: pure functions over a read-only inventory snapshot.

`components.vcenter.inventory.read_inventory` reads the snapshot (plain dataclasses,
`components.vcenter.inventory_model`); `check` judges a validated `Environment` against it. No
pyVmomi here: every rule is testable without vCenter, and the vCenter part is one function tested
against the simulator.

Each finding is `OK`, `WARN` or `BLOCKER` with the stack-file key it is about:
- BLOCKER: `pulumi up` would fail or build something broken (a missing datastore, a host without
  its RDMA vmnic, a vGPU profile the host does not offer, too little memory for the reservations).
- WARN: worth a look, but fine in a common case. Names that exist already are warnings: offline we
  cannot tell this stack's own VMs and switch (a re-run) from someone else's.
"""

from __future__ import annotations

from components.vcenter.inventory_model import Inventory
from stacks.environment.model import Environment
from stacks.tools.preflight.checks.esxi_firewall import check_management_rulesets
from stacks.tools.preflight.checks.gpus import check_gpus_in_use
from stacks.tools.preflight.checks.graphics import check_graphics
from stacks.tools.preflight.checks.hardware import check_hardware_version
from stacks.tools.preflight.checks.hosts import check_hosts, check_memory
from stacks.tools.preflight.checks.network import check_names_and_addresses, check_networks
from stacks.tools.preflight.checks.placement import check_datastore, check_placement
from stacks.tools.preflight.checks.privileges import check_privileges
from stacks.tools.preflight.checks.rdma import check_rdma_devices
from stacks.tools.preflight.checks.replicas import check_replica_space, check_replica_state
from stacks.tools.preflight.checks.report import Finding, Report, grouped, our_vm_names
from stacks.tools.preflight.checks.templates import check_templates

__all__ = ["Finding", "check"]


def check(env: Environment, inv: Inventory, stack: str | None = None, user: str | None = None) -> list[Finding]:
    """Every finding for `env` against the inventory snapshot; `stack` names the stack (its template
    copies carry it in their names: `checks.replicas`), `user` the account (`checks.privileges`)."""
    report = Report()
    our_vms = our_vm_names(env)
    check_placement(env, inv, report)
    check_templates(env, inv, report)
    check_hardware_version(env, inv, report)
    check_datastore(env, inv, report, our_vms, stack)
    check_replica_space(env, inv, report, stack)
    check_replica_state(env, inv, report, stack)
    check_hosts(env, inv, report)
    check_graphics(env, inv, report)
    check_rdma_devices(env, inv, report)
    check_management_rulesets(env, inv, report)
    check_gpus_in_use(env, inv, report, our_vms)
    check_memory(env, inv, report, our_vms)
    check_networks(env, inv, report)
    check_names_and_addresses(env, inv, report, our_vms)
    # Identical findings on several hosts or slots as one line (checks.report.grouped).
    return grouped([*check_privileges(env, inv, user), *report.findings], [*inv.hosts, *(h.name for h in env.hosts)])
