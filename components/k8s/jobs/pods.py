"""Pod templates shared by the sample MPIJobs: a small launcher and GPU workers.

Workers get one `nvidia.com/gpu` per MPI slot, the NVIDIA RuntimeClass, a memory-backed
`/dev/shm` (Docker's 64 MB default is far too small for NCCL and TensorFlow), and, over RoCE, the
RDMA device through the RDMA device plugin's extended resource plus `IPC_LOCK` to pin memory. Over
TCP they run on the host network, so that NCCL's sockets use the PVRDMA NIC's own interface (the
same NIC RoCE uses) instead of the pod network on the management NIC. No container is privileged
and none mounts host paths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.k8s.gpu_runtime import NVIDIA_RUNTIME_CLASS
from components.k8s.jobs.mpijob import SSH_PORT, sshd_command
from components.k8s.jobs.transport import Transport
from components.k8s.objects import GPU_NODE_LABEL, gpu_toleration

SHM_VOLUME = "dshm"


@dataclass(frozen=True, kw_only=True)
class WorkerShape:
    """How each GPU worker pod looks, whatever it runs."""

    gpus: int = 1
    """GPUs per worker (`nvidia.com/gpu` limit); also the MPI slots per worker. Default 1 (one
    vGPU per VM, as in the reference design)."""
    cpu: str = "2"
    """CPU request per worker; default 2 (the reference workers have 4 vCPU)."""
    memory: str = "8Gi"
    """Memory request per worker; default 8Gi (the reference workers have 24 GB)."""
    shm_size: str = "8Gi"
    """Size limit of the memory-backed /dev/shm; counts against the pod's memory. Default 8Gi."""
    transport: Transport = "roce"
    """roce (default): NCCL over the PVRDMA device; tcp: NCCL over sockets, no RDMA request."""
    rdma_resource: str = "rdma/pvrdma"
    """Extended resource of the RDMA device plugin (roce only); default `rdma/pvrdma`."""
    node_selector: Mapping[str, str] = field(default_factory=lambda: dict(GPU_NODE_LABEL))
    """Nodes workers may run on; default GPU workers (`nvidia.com/gpu.present=true`)."""
    runtime_class: str = NVIDIA_RUNTIME_CLASS
    """RuntimeClass of the workers; default `nvidia` (components/k8s/gpu_runtime.py)."""

    @property
    def host_network(self) -> bool:
        """TCP workers share the node's network namespace (see the module docstring)."""
        return self.transport == "tcp"

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"workers need at least one GPU, got {self.gpus}")
        if self.transport not in ("roce", "tcp"):
            raise ValueError(f"transport must be 'roce' or 'tcp', got {self.transport!r}")
        if "/" not in self.rdma_resource:
            raise ValueError(f"rdma_resource {self.rdma_resource!r} must be '<prefix>/<name>', e.g. rdma/pvrdma")


def env_list(env: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in env.items()]


def launcher_template(
    *,
    image: str,
    command: Sequence[str],
    env: Mapping[str, str],
    labels: Mapping[str, str],
    extra_volumes: Sequence[Mapping[str, Any]] = (),
    extra_mounts: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The launcher: runs `mpirun`, needs no GPU, may land on any node (GPU taint tolerated,
    since in small clusters the GPU workers are the only schedulable nodes). No `restartPolicy`:
    the operator overwrites it with the replica's (`ReplicaSpec.restart_policy`)."""
    template: dict[str, Any] = {
        "metadata": {"labels": {**labels, "gpucluster.io/mpi-role": "launcher"}},
        "spec": {
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "tolerations": [gpu_toleration()],
            "containers": [
                {
                    "name": "launcher",
                    "image": image,
                    "command": list(command),
                    "env": env_list(env),
                    "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                    "securityContext": {"privileged": False, "allowPrivilegeEscalation": False},
                }
            ],
        },
    }
    if extra_volumes:
        template["spec"]["volumes"] = [dict(v) for v in extra_volumes]
        template["spec"]["containers"][0]["volumeMounts"] = [dict(m) for m in extra_mounts]
    return template


def drop_net_raw(container: dict[str, Any]) -> None:
    """Drop NET_RAW from a host-network pod's container (in place): on the node's network raw
    sockets would reach its management and RDMA segments, and the jobs' admission policy refuses
    a host-network pod that keeps it (pod_policy.py). Neither sshd nor NCCL's sockets use it."""
    security = container["securityContext"] = dict(container.get("securityContext") or {})
    capabilities = security["capabilities"] = dict(security.get("capabilities") or {})
    capabilities["drop"] = sorted({*capabilities.get("drop", []), "NET_RAW"})


def worker_template(
    *,
    image: str,
    shape: WorkerShape,
    labels: Mapping[str, str],
    env: Mapping[str, str],
    init_containers: Sequence[Mapping[str, Any]] = (),
    extra_volumes: Sequence[Mapping[str, Any]] = (),
    extra_mounts: Sequence[Mapping[str, Any]] = (),
    setup: Sequence[str] = (),
) -> dict[str, Any]:
    """A GPU worker running sshd for the launcher's `mpirun`, after the `setup` steps (bash)."""
    limits: dict[str, Any] = {"nvidia.com/gpu": shape.gpus}
    security: dict[str, Any] = {"privileged": False}
    if shape.transport == "roce":
        # The device plugin injects /dev/infiniband/*; IPC_LOCK lets verbs pin (register) memory.
        limits[shape.rdma_resource] = 1
        security["capabilities"] = {"add": ["IPC_LOCK"]}
    container: dict[str, Any] = {
        "name": "worker",
        "image": image,
        "command": sshd_command(setup=setup),
        "resources": {
            "requests": {"cpu": shape.cpu, "memory": shape.memory},
            "limits": limits,
        },
        "securityContext": security,
        "volumeMounts": [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}, *map(dict, extra_mounts)],
        "readinessProbe": {"tcpSocket": {"port": SSH_PORT}, "periodSeconds": 5},
    }
    if env:
        # Only for the sshd process; ranks get their variables from the launcher (`mpirun -x`).
        container["env"] = env_list(env)
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "runtimeClassName": shape.runtime_class,
        "nodeSelector": dict(shape.node_selector),
        "tolerations": [gpu_toleration()],
        "containers": [container],
        "volumes": [
            {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": shape.shm_size}},
            *map(dict, extra_volumes),
        ],
    }
    if shape.host_network:
        # The namespace's Pod Security exception covers it (training_jobs.py). Ports taken on
        # the node while the job runs: sshd (SSH_PORT) and whatever the program listens on.
        # Declared, the scheduler keeps two such workers off one node instead of letting the
        # second sshd fail to bind (with hostNetwork a containerPort is a host port).
        spec["hostNetwork"] = True
        container["ports"] = [{"name": "ssh", "containerPort": SSH_PORT, "protocol": "TCP"}]
    if init_containers:
        spec["initContainers"] = [dict(c) for c in init_containers]
    if shape.host_network:
        for each in [container, *spec.get("initContainers", [])]:
            drop_net_raw(each)
    return {"metadata": {"labels": {**labels, "gpucluster.io/mpi-role": "worker"}}, "spec": spec}
