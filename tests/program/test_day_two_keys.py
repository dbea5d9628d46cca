"""Day two, per key class (issue 28): dev planned before and after an edit under the mock runtime.

Each scenario shows what the per-node verdicts alone say (often "unchanged"), what the plan's inputs
prove about the live cluster, and what `plan --against` now says about the key: its class, and
whether it is refused until the user states the rebuild with `--accept-rebuild KEY`.
"""

from __future__ import annotations

from typing import Any

from stacks.environment.day_two.check import DayTwoReport, day_two_report
from stacks.environment.loader import load_environment
from stacks.tools.plan.diff import PlanDiff, diff_plans
from stacks.tools.plan.mock_runtime import ProgramRun
from tests.program.conftest import EnvEdit, edited_view, run_view, stack_view

WORKERS = [f"gpu-workers-worker-{i}" for i in range(1, 5)]
NODES = ["control-plane-master", *WORKERS]


def plan_against(dev_run: ProgramRun, edit: EnvEdit) -> tuple[ProgramRun, PlanDiff, DayTwoReport]:
    view = edited_view("dev", edit)
    after = run_view(view, "dev")
    report = day_two_report(load_environment(stack_view("dev")), load_environment(view))
    return after, diff_plans(dev_run.resources, after.resources), report


def verdicts(diff: PlanDiff) -> dict[str, str]:
    return {c.node: c.verdict for c in diff.nodes}


def test_a_pod_cidr_change_touches_no_node_and_is_refused(dev_run: ProgramRun) -> None:
    """kubeadm keeps podSubnet in the cluster's kubeadm-config and Calico its IPPool: the new value
    reaches only first-boot data, which existing nodes never read again."""
    _, diff, report = plan_against(dev_run, lambda env: env["kubernetes"].update(podCidr="10.32.0.0/16"))
    assert set(verdicts(diff).values()) == {"unchanged"} and diff.down_at_once == 0  # all the old plan said
    (change,) = report.changes
    assert (change.key, change.entry.cls, change.refused) == ("kubernetes.podCidr", "no-effect-on-existing", True)
    text = "\n".join(report.lines())
    assert "REFUSED" in text and "IPPool" in text and "kubeadm-config" in text


def test_a_template_snapshot_change_says_it_has_no_effect_on_existing_nodes(dev_run: ProgramRun) -> None:
    _, diff, report = plan_against(dev_run, lambda env: env["vcenter"].update(templateSnapshot="base-v2"))
    assert set(verdicts(diff).values()) == {"unchanged"}
    (change,) = report.changes
    assert (change.key, change.entry.cls, change.refused) == (
        "vcenter.templateSnapshot",
        "no-effect-on-existing",
        False,
    )
    assert "no effect on existing nodes" in report.lines()[0]


def test_a_vcpu_change_rolls_the_workers(dev_run: ProgramRun) -> None:
    _, diff, report = plan_against(dev_run, lambda env: env["gpuWorkers"].update(vcpus=8))
    assert verdicts(diff) == {"control-plane-master": "unchanged", **dict.fromkeys(WORKERS, "replaced")}
    assert diff.down_at_once == 1
    (change,) = report.changes
    assert (change.key, change.entry.cls, change.refused) == ("gpuWorkers.vcpus", "rolls-nodes", False)
    assert "rolls the nodes" in report.lines()[0]


def test_a_drain_timeout_change_takes_effect_in_place(dev_run: ProgramRun) -> None:
    after, diff, report = plan_against(dev_run, lambda env: env["kubernetes"].update(drainTimeoutMinutes=30))
    assert set(verdicts(diff).values()) == {"unchanged"}
    assert after.named("drain-worker-1").inputs["timeout_seconds"] == 30 * 60  # the guard itself carries it
    (change,) = report.changes
    assert (change.key, change.entry.cls, change.refused) == ("kubernetes.drainTimeoutMinutes", "in-place", False)


def test_a_name_prefix_change_replaces_the_clusters_provider_and_is_refused(dev_run: ProgramRun) -> None:
    """The cluster's name (`<namePrefix>-k8s`) is the Kubernetes provider's clusterIdentifier: a new
    one replaces the provider and so every object the stack applied, while kubeadm keeps the old
    clusterName in kubeadm-config. Every node is merely renamed, which the verdicts show as harmless."""
    after, diff, report = plan_against(dev_run, lambda env: env["vm"].update(namePrefix="dev2-gpu"))
    assert set(verdicts(diff).values()) == {"updated in place"} and diff.down_at_once == 0

    def identifiers(run: ProgramRun) -> set[Any]:
        providers = run.by_type("pulumi:providers:kubernetes")
        return {r.inputs["clusterIdentifier"] for r in providers if "clusterIdentifier" in r.inputs}

    assert identifiers(dev_run) == {"dev-gpu-k8s"} and identifiers(after) == {"dev2-gpu-k8s"}
    (change,) = report.changes
    assert (change.key, change.entry.cls, change.refused) == ("vm.namePrefix", "rebuild", True)


def test_a_workers_new_management_address_would_change_its_live_nics_mac_and_is_refused(dev_run: ProgramRun) -> None:
    """The NIC's static MAC derives from the address, and the guest's network config matches that
    MAC: an in-place MAC change on a running VM takes the node off its network."""

    def readdress(env: dict[str, Any]) -> None:
        env["gpuWorkers"]["nodes"][0]["managementIp"] = "10.10.0.61"

    _, diff, report = plan_against(dev_run, readdress)
    worker = next(c for c in diff.nodes if c.node == WORKERS[0])
    assert worker.verdict == "updated in place" and "networkInterfaces[0].macAddress" in worker.reasons[-1]
    (change,) = report.changes
    assert change.where == "gpuWorkers.nodes[worker-1].managementIp"
    assert (change.entry.cls, change.refused) == ("rebuild", True)


def test_a_change_that_rolls_a_lone_control_plane_node_is_refused(dev_run: ProgramRun) -> None:
    """dev has one control-plane node: replacing it starts a new, empty cluster (etcd's data goes with
    the VM, and the new node runs `kubeadm init`: docs/bootstrap.md), which `plan` only noted. Like a
    version change there, it is refused unless the rebuild is stated."""
    _, diff, report = plan_against(dev_run, lambda env: env["controlPlane"].update(memoryMb=32768))
    assert verdicts(diff)["control-plane-master"] == "replaced"
    (change,) = report.changes
    assert (change.key, change.entry.cls, change.refused) == ("controlPlane.memoryMb", "rolls-nodes", True)
    assert "new, empty cluster" in change.entry.happens


def test_the_same_change_with_three_control_plane_nodes_rolls_them() -> None:
    before = load_environment(stack_view("staging"))
    after = load_environment(edited_view("staging", lambda env: env["controlPlane"].update(memoryMb=65536)))
    (change,) = day_two_report(before, after).changes
    assert (change.key, change.refused) == ("controlPlane.memoryMb", False)
