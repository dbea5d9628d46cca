"""What `python -m stacks plan` writes for each stack, checked the way a cluster would.

Every Kubernetes object in `manifests/` validates strictly (unknown fields are errors) for the
stack's own Kubernetes version; MPIJobs validate against the MPI Operator 0.8.0 CRD, their pod
templates against the core schema; no container is privileged, every image is pinned, every
namespace carries Pod Security labels.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from stacks.environment.loader import load_environment, read_stack_file
from stacks.tools.plan.command import plan_stack
from tests.components.k8s.addons.k8s_checks import check_policy
from tests.components.k8s.jobs.crd_schema import MPIJOB_CRD, load_crd_schema, validate
from tests.program.conftest import edited_view
from tests.stack_fixtures import fixture_stack

REPO = Path(__file__).resolve().parents[2]
STACKS = ["dev", "staging", "prod", "sim", "staging@1.37.1"]
"""The shipped stacks, and staging moved to the newest minor (`STACK@VERSION`): every object a 1.37
stack renders validates against kubernetes-validate's 1.37 schemas (it ships 1.37.0's)."""


def _at(version: str) -> Callable[[dict[str, Any]], None]:
    def edit(env: dict[str, Any]) -> None:
        env["kubernetes"]["version"] = version

    return edit


@pytest.fixture(scope="module", params=STACKS)
def planned(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, str, list[dict[str, Any]]]:
    stack, _, moved_to = str(request.param).partition("@")
    view = edited_view(stack, _at(moved_to)) if moved_to else read_stack_file(fixture_stack(stack))
    version = load_environment(view).kubernetes.version
    assert version == (moved_to or version)
    out = tmp_path_factory.mktemp(f"plan-{stack}")
    plan_stack(view, stack=stack, out_dir=out)
    objs = [
        doc
        for path in sorted((out / "manifests").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]
    return stack, version, objs


def test_plan_writes_the_add_ons_of_the_kubernetes_layer(planned: tuple[str, str, list[dict[str, Any]]]) -> None:
    _, _, objs = planned
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert ("DaemonSet", "nvidia-device-plugin") in kinds
    assert ("ConfigMap", "rdma-devices") in kinds
    assert ("Deployment", "mpi-operator") in kinds


def test_every_object_is_valid_for_the_stacks_kubernetes_version(
    planned: tuple[str, str, list[dict[str, Any]]],
) -> None:
    _, version, objs = planned
    # kubernetes-validate takes the newest schemas not newer than the version, and refuses a newer
    # minor than it has: each stack's own minor is there (1.37.0's schemas for a 1.37 stack).
    assert f"{version.rsplit('.', 1)[0]}.0" in kubernetes_validate.utils.all_versions()
    problems = []
    for obj in objs:
        if obj["kind"] == "MPIJob":
            # A custom resource: its pod templates are core objects, checked as such.
            for role, replica in obj["spec"]["mpiReplicaSpecs"].items():
                template = {
                    "apiVersion": "v1",
                    "kind": "PodTemplate",
                    "metadata": {"name": role.lower()},
                    "template": replica["template"],
                }
                problems += _strict(template, version)
        else:
            problems += _strict(obj, version)
    assert problems == []


def test_mpijobs_match_the_mpi_operator_crd(planned: tuple[str, str, list[dict[str, Any]]]) -> None:
    _, _, objs = planned
    jobs = [o for o in objs if o["kind"] == "MPIJob"]
    # Every shipped stack runs the fabric check first; the benchmark, which wants the same GPUs,
    # is switched on after it passed (docs/training-jobs.md).
    assert sorted(j["metadata"]["name"] for j in jobs) == ["nccl-fabric-check-roce"]
    schema = load_crd_schema(MPIJOB_CRD, "v2beta1")
    assert [error for job in jobs for error in validate(schema, job)] == []


def test_house_rules_hold(planned: tuple[str, str, list[dict[str, Any]]]) -> None:
    check_policy(planned[2])


def _strict(obj: dict[str, Any], version: str) -> list[str]:
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{obj['kind']}/{obj['metadata'].get('name')}: {'.'.join(map(str, error.path))}: {error.message}"]
    return []
