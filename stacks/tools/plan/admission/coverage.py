"""Does the fabric check exercise every GPU worker and every GPU? (issue 54 item 2)

A fabric check that runs on some of the workers says nothing of the others' RDMA path, yet its
verdict would PASS: six one-GPU ranks packed two to a node covered three hosts of six. So `plan`
places the fabric check's MPIJob as the scheduler would (check.py) and then refuses it unless
its worker pods land on every GPU worker node, and its ranks (`slotsPerWorker` per worker pod:
the MPI Operator writes `<worker>.<job>.<namespace>.svc slots=<slotsPerWorker>` into the
launcher's hostfile, kubeflow/mpi-operator pkg/controller/mpi_job_controller.go `newConfigMap`)
are one per GPU: each pod's `nvidia.com/gpu` equals its slots, and all of them together are
every GPU the workers have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stacks.tools.plan.admission.model import Workload
from stacks.tools.plan.admission.nodes import ClusterModel

FABRIC_CHECK_COMPONENT = "fabric-check"
"""`app.kubernetes.io/component` of the fabric check's objects (components/k8s/jobs/fabric_check.py)."""
FIX = (
    "the fabric check must run one rank per GPU on every GPU worker: leave jobs.workers unset (every "
    "GPU worker; disable jobs.fabricCheck for a smaller baseline run)"
)


def is_fabric_check(workload: Workload) -> bool:
    labels = (workload.obj.get("metadata") or {}).get("labels") or {}
    return workload.kind == "MPIJob" and labels.get("app.kubernetes.io/component") == FABRIC_CHECK_COMPONENT


def _gpus_per_pod(spec: Mapping[str, Any]) -> int:
    return sum(
        int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
        for c in spec.get("containers") or []
    )


def fabric_coverage(workload: Workload, worker_nodes: Sequence[str], cluster: ClusterModel) -> tuple[str, str]:
    """("OK" | "FAIL", detail) for the fabric check whose worker pods were placed on `worker_nodes`."""
    gpu_nodes = [p.node.name for p in cluster.nodes if p.gpus]
    gpus = sum(p.gpus for p in cluster.nodes)
    worker = workload.groups[0]
    slots = int((workload.obj.get("spec") or {}).get("slotsPerWorker", 1))
    per_pod = _gpus_per_pod(worker.spec)
    ranks = worker.replicas * slots
    problems = []
    missing = [name for name in gpu_nodes if name not in set(worker_nodes)]
    if missing:
        problems.append(
            f"no rank on {', '.join(missing)} ({len(missing)} of {len(gpu_nodes)} GPU workers): their RDMA "
            "path is never exercised, and the verdict would PASS without them"
        )
    if slots != per_pod:
        problems.append(f"slotsPerWorker {slots} but each worker pod holds {per_pod} GPU(s): one rank per GPU")
    if ranks != gpus:
        problems.append(f"{ranks} rank(s) for the workers' {gpus} GPUs")
    if problems:
        return "FAIL", "; ".join(problems) + f"; {FIX}"
    return "OK", (
        f"{worker.replicas} worker pod(s), one on each GPU worker ({', '.join(worker_nodes)}), "
        f"{ranks} ranks on all {gpus} GPUs (slotsPerWorker {slots}), and the launcher"
    )
