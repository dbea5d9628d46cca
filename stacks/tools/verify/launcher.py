"""Which launcher pod and which run of its container `stacks verify` reads: pure functions over
the pod objects `kubectl get pods --output json` returns.

The MPI Operator (kubeflow/mpi-operator v0.8.0) runs the launcher as a batch Job whose pods carry
`training.kubeflow.org/job-name=<mpijob>` and `training.kubeflow.org/job-role=launcher`
(mpi_job_controller.go `defaultLabels`, applied in `newLauncherPodTemplate`). A job can have run
more than once: the batch Job makes a new pod per failure up to `backoffLimit`, and with
`restartPolicy: OnFailure` the kubelet restarts the container in the same pod. `kubectl logs
job/<name>` shows the current container of one pod of its own choosing, so after a retry it can
judge an older pod's run, and after a restart a run that has not finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
LAUNCHER_CONTAINER = "launcher"
"""The launcher container's name in our pod templates (components/k8s/jobs/pods.py)."""


def launcher_selector(mpijob: str) -> str:
    """The label selector of an MPIJob's launcher pods."""
    return f"{JOB_NAME_LABEL}={mpijob},{JOB_ROLE_LABEL}=launcher"


@dataclass(frozen=True)
class LogSource:
    """One run of the launcher container: `kubectl logs POD --container C [--previous]`."""

    pod: str
    container: str
    previous: bool
    restarts: int

    def describe(self) -> str:
        if self.previous:
            return (
                f"log: pod {self.pod}, its previous run (the container restarted {self.restarts} time(s) "
                "and the current run has not finished)"
            )
        restarted = f", run {self.restarts + 1} (restarted {self.restarts} time(s))" if self.restarts else ""
        return f"log: pod {self.pod}{restarted}"


def newest_pod(pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pod created last (the batch Job's latest attempt). creationTimestamp is RFC 3339 UTC
    with second precision, so it sorts as text; the name breaks a tie deterministically."""
    if not pods:
        return None
    return max(pods, key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))


def log_source(pod: dict[str, Any]) -> LogSource:
    """The newest finished run of the launcher container, else the current one.

    `--previous` when the container restarted and its current run has not finished (running,
    or waiting to restart): the last finished run is the one a verdict can judge. A finished
    current run (state `terminated`) is the newest run, read as it is.
    """
    statuses = pod.get("status", {}).get("containerStatuses", [])
    status = next((s for s in statuses if s.get("name") == LAUNCHER_CONTAINER), statuses[0] if statuses else {})
    container = status.get("name", LAUNCHER_CONTAINER)
    restarts = int(status.get("restartCount", 0))
    finished = "terminated" in status.get("state", {})
    return LogSource(
        pod=pod["metadata"]["name"], container=container, previous=restarts > 0 and not finished, restarts=restarts
    )
