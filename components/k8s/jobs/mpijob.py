"""A typed builder for Kubeflow `kubeflow.org/v2beta1` MPIJobs (MPI Operator v0.8.0).

The dataclasses hold what decides the job's shape (replica counts, slots, policies); pod templates
are plain `v1 PodTemplateSpec` dicts. `render_mpijob` turns them into the object the MPI Operator
reads. Field names and enums follow the v0.8.0 CRD; the tests validate every rendered job against
that CRD's schema with unknown fields counted as errors.

Also here: the `mpirun` arithmetic and command line shared by the sample jobs, and the switch
between NCCL over RoCE (PVRDMA) and NCCL over TCP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from components.k8s.jobs.transport import Transport, nccl_transport_env
from components.k8s.objects import check_dns_label

__all__ = ["Transport", "nccl_transport_env"]  # re-exported: they lived here before transport.py

API_VERSION = "kubeflow.org/v2beta1"
KIND = "MPIJob"

MpiImplementation = Literal["OpenMPI", "Intel", "MPICH"]
CleanPodPolicy = Literal["None", "Running", "All"]
LauncherCreationPolicy = Literal["AtStartup", "WaitForWorkersReady"]
RestartPolicy = Literal["Always", "OnFailure", "Never", "ExitCode"]


@dataclass(frozen=True, kw_only=True)
class ReplicaSpec:
    """One replica type (Launcher or Worker)."""

    template: Mapping[str, Any]
    """A `v1 PodTemplateSpec` as a dict (`metadata`, `spec`)."""
    replicas: int = 1
    """Number of pods of this type. Default 1."""
    restart_policy: RestartPolicy | None = None
    """Restart policy of the replica's pods; default None, the operator's default: OnFailure for
    the launcher, Never for workers (kubeflow/mpi-operator v0.8.0 v2beta1/constants.go
    `DefaultLauncherRestartPolicy`, `DefaultRestartPolicy`). The operator writes it into the pod
    template, overwriting the template's own `restartPolicy` (mpi_job_controller.go
    `newLauncherPodTemplate`, `setRestartPolicy`; `ExitCode` becomes Never there), so set it
    here, never in the template."""

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError(f"replicas must be at least 1, got {self.replicas}")
        if "spec" not in self.template:
            raise ValueError("a replica's template needs a pod 'spec'")


@dataclass(frozen=True, kw_only=True)
class RunPolicy:
    """`spec.runPolicy`: what happens to pods and the job when it ends or fails."""

    clean_pod_policy: CleanPodPolicy = "Running"
    """Which pods to delete when the job finishes: Running (default: stop workers, keep the
    launcher's logs), All, or None."""
    backoff_limit: int | None = None
    """Retries of the launcher before the job is failed: the operator passes it to the launcher's
    batch Job, which makes a new pod per failure; default None (Kubernetes' Job default, 6)."""
    ttl_seconds_after_finished: int | None = None
    """Delete the finished job after this many seconds; default None (keep it)."""
    active_deadline_seconds: int | None = None
    """Fail the job when it runs longer than this; default None (no deadline)."""

    def __post_init__(self) -> None:
        for what, value in (
            ("backoff_limit", self.backoff_limit),
            ("ttl_seconds_after_finished", self.ttl_seconds_after_finished),
            ("active_deadline_seconds", self.active_deadline_seconds),
        ):
            if value is not None and value < 0:
                raise ValueError(f"runPolicy {what} must be >= 0, got {value}")


@dataclass(frozen=True, kw_only=True)
class MpiJobSpec:
    """Everything an MPIJob is rendered from."""

    name: str
    namespace: str
    launcher: ReplicaSpec
    worker: ReplicaSpec
    slots_per_worker: int = 1
    """MPI slots (processes) per worker; set it to the GPUs per worker. Default 1."""
    run_policy: RunPolicy = field(default_factory=RunPolicy)
    """Default: clean up running pods when done, operator defaults otherwise."""
    mpi_implementation: MpiImplementation = "OpenMPI"
    """OpenMPI (default), Intel or MPICH: how the operator writes the hostfile and env."""
    ssh_auth_mount_path: str = "/root/.ssh"
    """Where the operator mounts the generated SSH keys; default /root/.ssh (images run as root)."""
    launcher_creation_policy: LauncherCreationPolicy = "WaitForWorkersReady"
    """WaitForWorkersReady (default) creates the launcher only once every worker is Ready, so
    `mpirun` does not race worker start-up (kubeflow/mpi-operator issues 386, 482); the CRD's own
    default is AtStartup."""
    run_launcher_as_worker: bool = False
    """Also run ranks in the launcher pod; default False (the launcher needs no GPU)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels of the MPIJob object; default none."""

    def __post_init__(self) -> None:
        check_dns_label(self.name, "MPIJob name")
        check_dns_label(self.namespace, "MPIJob namespace")
        if self.launcher.replicas != 1:
            raise ValueError(f"an MPIJob has exactly one launcher, got {self.launcher.replicas}")
        if self.slots_per_worker < 1:
            raise ValueError(f"slots_per_worker must be at least 1, got {self.slots_per_worker}")
        if not self.ssh_auth_mount_path.startswith("/"):
            raise ValueError("ssh_auth_mount_path must be an absolute path")


def _replica(spec: ReplicaSpec) -> dict[str, Any]:
    replica: dict[str, Any] = {"replicas": spec.replicas, "template": dict(spec.template)}
    if spec.restart_policy is not None:
        replica["restartPolicy"] = spec.restart_policy
    return replica


def render_run_policy(policy: RunPolicy) -> dict[str, Any]:
    rendered: dict[str, Any] = {"cleanPodPolicy": policy.clean_pod_policy}
    if policy.backoff_limit is not None:
        rendered["backoffLimit"] = policy.backoff_limit
    if policy.ttl_seconds_after_finished is not None:
        rendered["ttlSecondsAfterFinished"] = policy.ttl_seconds_after_finished
    if policy.active_deadline_seconds is not None:
        rendered["activeDeadlineSeconds"] = policy.active_deadline_seconds
    return rendered


def render_mpijob(spec: MpiJobSpec) -> dict[str, Any]:
    """The MPIJob object."""
    metadata: dict[str, Any] = {"name": spec.name, "namespace": spec.namespace}
    if spec.labels:
        metadata["labels"] = dict(spec.labels)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": {
            "slotsPerWorker": spec.slots_per_worker,
            "runLauncherAsWorker": spec.run_launcher_as_worker,
            "mpiImplementation": spec.mpi_implementation,
            "sshAuthMountPath": spec.ssh_auth_mount_path,
            "launcherCreationPolicy": spec.launcher_creation_policy,
            "runPolicy": render_run_policy(spec.run_policy),
            "mpiReplicaSpecs": {
                "Launcher": _replica(spec.launcher),
                "Worker": _replica(spec.worker),
            },
        },
    }


def mpirun_np(workers: int, slots_per_worker: int) -> int:
    """Total MPI ranks (`mpirun -np`): one per slot on every worker."""
    if workers < 1 or slots_per_worker < 1:
        raise ValueError(f"need at least one worker and one slot, got {workers} x {slots_per_worker}")
    return workers * slots_per_worker


SSH_PORT = 2222
"""Port of the workers' sshd. Not 22: over TCP the workers share the node's network namespace,
where the node's own sshd already listens on 22 (MPI Operator's base image uses 2222 too)."""

SSH_CLIENT_OPTIONS = (
    f"-p {SSH_PORT} -o ConnectionAttempts=10 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
)
"""How the launcher's `mpirun` reaches the workers (Open MPI `plm_rsh_args`). The host keys are
generated at worker start, so there is nothing to check them against; `/root/.ssh` is a read-only
Secret mount, so known_hosts cannot be written. `ConnectionAttempts=10` is what the operator sets
(`OMPI_MCA_plm_rsh_args`); a command-line `-mca` overrides that environment variable."""


def mpirun_command(
    *,
    np: int,
    exported_env: Sequence[str],
    mca: Sequence[tuple[str, str]],
    program: Sequence[str],
    map_by: str = "slot",
) -> list[str]:
    """An Open MPI `mpirun` line: ranks, placement, ssh, exported variables, MCA parameters, program.

    Variables are exported with `-x NAME` (their values come from the launcher's environment), so
    the values live in one place: the launcher container's `env`. `map_by`: Open MPI's
    `-map-by`; default `slot` (fill each worker's slots), `ppr:1:node` for one rank per worker.
    """
    command = ["mpirun", "--allow-run-as-root", "-np", str(np), "-bind-to", "none", "-map-by", map_by]
    command += ["-mca", "plm_rsh_args", SSH_CLIENT_OPTIONS]
    for name in exported_env:
        command += ["-x", name]
    for key, value in mca:
        command += ["-mca", key, value]
    return command + list(program)


REQUIRE_SSHD = (
    "test -x /usr/sbin/sshd || { echo 'gpucluster: this image has no sshd (/usr/sbin/sshd), which MPI workers "
    "need: run the job on an image that has it (images/site/Dockerfile, stack key jobs.siteImage)' >&2; exit 1; }"
)
"""Workers install nothing at start (an air-gapped site has no archive to install from); an image
without sshd (NVIDIA's framework images ship only the ssh client) is named as the cause."""


def sshd_command(*, setup: Sequence[str] = ()) -> list[str]:
    """What an OpenMPI MPIJob's workers run: sshd in the foreground, for the launcher's `mpirun`.

    The operator mounts the generated keys at `sshAuthMountPath` (/root/.ssh) from a Secret; with
    sshd's default `StrictModes yes` sshd refuses `authorized_keys` there because of the Secret
    volume's ownership and modes (kubeflow/mpi-operator#424; the operator's own base image sets
    `StrictModes no` in build/base/Dockerfile for this reason). `-o StrictModes=no` on the command
    line overrides whatever the image's sshd_config says, so every image behaves the same.
    """
    steps = [REQUIRE_SSHD]
    steps += setup  # more start steps (bash), before sshd: ranks start only once it listens
    steps += [
        "mkdir -p /run/sshd",
        "ssh-keygen -A",
        f"exec /usr/sbin/sshd -De -p {SSH_PORT} -o StrictModes=no",
    ]
    return ["/bin/bash", "-c", " && ".join(steps)]


SSHD_COMMAND = sshd_command()
"""The workers' command for images that ship sshd."""
