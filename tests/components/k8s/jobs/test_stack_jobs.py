"""The stack's `jobs` keys as a user writes them, through the real program under mocks: the
objects `plan` writes, validated strictly, and the rule that refuses jobs that can deadlock."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacks.environment.loader import ENVIRONMENT_KEY, InvalidEnvironment, load_environment, read_stack_file
from stacks.tools.plan.command import plan_stack
from tests.components.k8s.addons.k8s_checks import check_policy, validate_strict
from tests.components.k8s.jobs.crd_schema import MPIJOB_CRD, load_crd_schema, validate
from tests.stack_fixtures import fixture_stack

REPO = Path(__file__).resolve().parents[4]
DEV = (fixture_stack("dev")).read_text()
SAMPLE_OFF = "      sample:\n        # Off until the fabric check has passed: both want every GPU at once (docs/training-jobs.md).\n        enabled: false\n"


def stack_with(tmp_path: Path, jobs_yaml: str) -> Path:
    """dev with its `jobs` block replaced."""
    start = DEV.index("    jobs:\n")
    end = DEV.index("      fabricCheck:\n        enabled: true\n", start) + len(
        "      fabricCheck:\n        enabled: true\n"
    )
    path = tmp_path / "Pulumi.jobs.yaml"
    path.write_text(DEV[:start] + jobs_yaml + DEV[end:])
    return path


SITE_IMAGE = "registry.site.example/gpucluster/site:25.06-1"
BENCHMARK_OVER_TCP = f"""    jobs:
      transport: tcp
      siteImage: {SITE_IMAGE}
      extraEnv:
        NCCL_DEBUG_SUBSYS: INIT,NET
      sample:
        enabled: true
        benchmark: pytorch-ddp
        batchSize: 64
      fabricCheck:
        enabled: false
"""


@pytest.fixture(scope="module")
def benchmark_plan(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("jobs")
    path = stack_with(folder, BENCHMARK_OVER_TCP)
    out = folder / "plan"
    plan_stack(read_stack_file(path), stack="jobs", out_dir=out)
    return [doc for p in sorted((out / "manifests").glob("*.yaml")) for doc in yaml.safe_load_all(p.read_text()) if doc]


def test_the_switch_runs_the_pytorch_benchmark_over_tcp_with_the_extra_env(
    benchmark_plan: list[dict[str, Any]],
) -> None:
    [mpijob] = [o for o in benchmark_plan if o["kind"] == "MPIJob"]
    assert mpijob["metadata"]["name"] == "pytorch-ddp-resnet50-tcp"
    launcher = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in launcher["env"]}
    assert env["NCCL_DEBUG_SUBSYS"] == "INIT,NET" and env["NCCL_NET"] == "Socket"
    assert "--batch-size=64" in launcher["command"]
    # The site image (images/site/Dockerfile): NVIDIA's PyTorch image plus sshd.
    assert launcher["image"] == SITE_IMAGE
    worker = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 4 and worker["template"]["spec"]["hostNetwork"] is True
    command = shlex.join(worker["template"]["spec"]["containers"][0]["command"])
    assert "apt-get" not in command and "sshd -De" in command
    assert worker["template"]["spec"]["containers"][0]["image"] == SITE_IMAGE
    [namespace] = [o for o in benchmark_plan if o["kind"] == "Namespace" and o["metadata"]["name"] == "training"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_over_tcp_the_jobs_accept_the_node_networks(benchmark_plan: list[dict[str, Any]]) -> None:
    """Issue 41 item 1, as the program wires it: host-network workers connect back to mpirun in the
    launcher from node addresses, so the jobs' NetworkPolicy admits the stack's node networks."""
    env = load_environment(read_stack_file(fixture_stack("dev")))
    [policy] = [o for o in benchmark_plan if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == "training"]
    sources = policy["spec"]["ingress"][0]["from"]
    blocks = {peer["ipBlock"]["cidr"] for peer in sources if "ipBlock" in peer}
    assert blocks == {str(env.management_network.subnet), str(env.rdma_network.subnet)}
    assert {"podSelector": {}} in sources


def test_the_planned_job_objects_validate_strictly(benchmark_plan: list[dict[str, Any]]) -> None:
    jobs = [o for o in benchmark_plan if o.get("metadata", {}).get("namespace") == "training"]
    # The NetworkPolicy guards the namespace (issue 37); it validates strictly like the ConfigMap.
    assert {o["kind"] for o in jobs} == {"ConfigMap", "MPIJob", "NetworkPolicy"}
    for obj in jobs:
        if obj["kind"] == "MPIJob":
            assert validate(load_crd_schema(MPIJOB_CRD, "v2beta1"), obj) == []
            for role, replica in obj["spec"]["mpiReplicaSpecs"].items():
                validate_strict(
                    {
                        "apiVersion": "v1",
                        "kind": "PodTemplate",
                        "metadata": {"name": role.lower()},
                        "template": replica["template"],
                    }
                )
        else:
            validate_strict(obj)
    check_policy(jobs)


@pytest.mark.parametrize(
    ("jobs_yaml", "valid"),
    [
        (SAMPLE_OFF.join(["    jobs:\n      transport: roce\n", "      fabricCheck:\n        enabled: true\n"]), True),
        (
            f"    jobs:\n      siteImage: {SITE_IMAGE}\n      sample:\n        enabled: true\n      fabricCheck:\n        enabled: true\n",
            False,
        ),
        (
            f"    jobs:\n      siteImage: {SITE_IMAGE}\n      workers: 2\n      sample:\n        enabled: true\n      fabricCheck:\n        enabled: true\n",
            True,
        ),
        (
            f"    jobs:\n      siteImage: {SITE_IMAGE}\n      sample:\n        enabled: true\n      fabricCheck:\n        enabled: false\n",
            True,
        ),
    ],
)
def test_jobs_must_fit_in_the_gpus_together(tmp_path: Path, jobs_yaml: str, valid: bool) -> None:
    view = read_stack_file(stack_with(tmp_path, jobs_yaml))
    if valid:
        load_environment(view)
        return
    with pytest.raises(InvalidEnvironment) as refused:
        load_environment(view)
    assert [p.split(":", 2)[1] for p in refused.value.problems] == ["environment.jobs"]
    assert f"{ENVIRONMENT_KEY}.jobs: " in refused.value.problems[0] and "deadlock" in refused.value.problems[0]
