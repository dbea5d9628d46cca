"""What pods in the jobs' namespace may do: Pod Security `baseline` plus exactly what the stack's
transport needs, as a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since
Kubernetes 1.30; the stack supports 1.32 to 1.35).

Why not the namespace's Pod Security label alone: `baseline` refuses both things GPU workers need
(Pod Security Standards, kubernetes.io/docs/concepts/security/pod-security-standards): adding
`IPC_LOCK` (not in baseline's capability list: AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER, FSETID,
KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT), which RoCE workers
need to register memory with the PVRDMA device, and `hostNetwork`, which TCP workers use. Pod
Security admission has no per-capability exemption (its exemptions are whole usernames, runtime
classes or namespaces), and a ValidatingAdmissionPolicy can only deny, never admit what Pod
Security refused. So the namespace enforces `privileged` (warn and audit stay `baseline`, so the
exception shows), and this policy denies everything `privileged` would let through beyond
baseline plus those exceptions: privileged containers, hostPath (so no pod mounts `/`), hostPID
and hostIPC, other capabilities, host ports, and the AppArmor, SELinux, seccomp, /proc-mount and
sysctl loosenings that baseline forbids. It applies to every pod of the namespace, whoever creates
it (the MPI Operator creates the workers): an MPIJob's editor gets what baseline gives plus
`IPC_LOCK` (RoCE) or the host network (TCP), and nothing else.

Two more rules close what baseline leaves open (issue 40 item 7). A host-network pod must drop
`NET_RAW` (or `ALL`) in every container: containerd grants NET_RAW by default (it is in
baseline's allowed set of defaults), and on the host network it opens raw sockets on the node's
management and RDMA interfaces: sniffing them, or spoofing a trusted node address past the node
firewall. And `spec.nodeName` is refused when a pod is created: a pod that names its node skips
the scheduler, and with it the NoSchedule taints that keep job pods off the control-plane nodes
(the kubelet checks only NoExecute taints and resources on admission: kubernetes.io/docs/
concepts/scheduling-eviction/taint-and-toleration, "nodeName"). Updates keep it, since the
scheduler's binding has set it by then.

The expressions use only CEL's standard macros and functions, so the tests evaluate them with
cel-python against the pods the stack renders and against pods it must refuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.k8s.objects import check_dns_label

BASELINE_CAPABILITIES = (
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
)
"""Capabilities baseline allows a container to add (Pod Security Standards, "Capabilities")."""
SAFE_SYSCTLS = (
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
)
"""Sysctls baseline allows (Pod Security Standards, "Sysctls"; the last five since 1.27/1.29)."""
SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
"""SELinux types baseline allows (Pod Security Standards, "SELinux"; container_engine_t since 1.31)."""


@dataclass(frozen=True, kw_only=True)
class JobPodExceptions:
    """What the jobs' pods may do beyond baseline."""

    ipc_lock: bool = False
    """Containers may add `IPC_LOCK` (RoCE: verbs pin memory)."""
    host_network: bool = False
    """Pods may use the host network (TCP transport), and then declare host ports equal to their
    container ports (the API server defaults `hostPort` to `containerPort` on host-network pods)."""

    @property
    def any(self) -> bool:
        return self.ipc_lock or self.host_network


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


def _unset_or(path: str, check: str) -> str:
    """`(check)`, or true when any field on `path` (dotted, after its root variable) is unset."""
    parts = path.split(".")
    guards = " && ".join(f"has({'.'.join(parts[: i + 1])})" for i in range(1, len(parts)))
    return f"(!({guards}) || ({check}))"


def _pod_and_containers(field: str, check: str) -> str:
    """`check` (over `{}`, the field's value) on the pod's securityContext and every container's."""
    pod = f"object.spec.securityContext.{field}"
    container = f"c.securityContext.{field}"
    return f"{_unset_or(pod, check.format(pod))} && variables.containers.all(c, {_unset_or(container, check.format(container))})"


def _selinux_ok(options: str) -> str:
    return (
        f"(!has({options}.type) || {options}.type in {_list(SELINUX_TYPES)}) "
        f"&& !has({options}.user) && !has({options}.role)"
    )


def _validations(exceptions: JobPodExceptions) -> list[dict[str, str]]:
    host_network = "(has(object.spec.hostNetwork) && object.spec.hostNetwork)"
    host_port_ok = "!has(p.hostPort) || p.hostPort == 0"
    if exceptions.host_network:
        host_port_ok += f" || ({host_network} && p.hostPort == p.containerPort)"
    capabilities = list(BASELINE_CAPABILITIES) + (["IPC_LOCK"] if exceptions.ipc_lock else [])
    apparmor_annotations = (
        "(!has(object.metadata.annotations) || object.metadata.annotations.all(k, "
        "!k.startsWith('container.apparmor.security.beta.kubernetes.io/') || "
        "object.metadata.annotations[k] == 'runtime/default' || object.metadata.annotations[k].startsWith('localhost/')))"
    )
    rules = [
        (
            "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))",
            "hostPath volumes are not allowed in this namespace",
        ),
        (
            "variables.containers.all(c, "
            + _unset_or("c.securityContext.privileged", "!c.securityContext.privileged")
            + ")",
            "privileged containers are not allowed in this namespace",
        ),
        (
            "!(has(object.spec.hostPID) && object.spec.hostPID) && !(has(object.spec.hostIPC) && object.spec.hostIPC)",
            "hostPID and hostIPC are not allowed in this namespace",
        ),
        (
            "variables.containers.all(c, "
            + _unset_or(
                "c.securityContext.capabilities.add",
                f"c.securityContext.capabilities.add.all(x, x in {_list(capabilities)})",
            )
            + ")",
            "containers may add only baseline's capabilities"
            + (" and IPC_LOCK" if exceptions.ipc_lock else "")
            + " in this namespace",
        ),
        (
            f"variables.containers.all(c, !has(c.ports) || c.ports.all(p, {host_port_ok}))",
            "host ports are not allowed in this namespace"
            + (" (a host-network pod may declare its own container ports)" if exceptions.host_network else ""),
        ),
        (
            _pod_and_containers("windowsOptions.hostProcess", "!{}"),
            "Windows HostProcess containers are not allowed in this namespace",
        ),
        (
            _pod_and_containers("seccompProfile.type", "{} != 'Unconfined'"),
            "seccomp profile Unconfined is not allowed in this namespace",
        ),
        (
            _pod_and_containers("appArmorProfile.type", "{} != 'Unconfined'") + " && " + apparmor_annotations,
            "AppArmor profile unconfined is not allowed in this namespace",
        ),
        (
            _unset_or(
                "object.spec.securityContext.seLinuxOptions", _selinux_ok("object.spec.securityContext.seLinuxOptions")
            )
            + " && variables.containers.all(c, "
            + _unset_or("c.securityContext.seLinuxOptions", _selinux_ok("c.securityContext.seLinuxOptions"))
            + ")",
            "SELinux user, role or a type other than baseline's container types is not allowed in this namespace",
        ),
        (
            "variables.containers.all(c, "
            + _unset_or("c.securityContext.procMount", "c.securityContext.procMount == 'Default'")
            + ")",
            "procMount other than Default is not allowed in this namespace",
        ),
        (
            _unset_or(
                "object.spec.securityContext.sysctls",
                f"object.spec.securityContext.sysctls.all(s, s.name in {_list(SAFE_SYSCTLS)})",
            ),
            "only baseline's safe sysctls are allowed in this namespace",
        ),
    ]
    rules.append(
        (
            "request.operation != 'CREATE' || !has(object.spec.nodeName) || object.spec.nodeName == ''",
            "nodeName may not be set when a pod is created in this namespace; use a nodeSelector",
        )
    )
    if exceptions.host_network:
        # Unlike the checks above, an unset drop list is the refusal here.
        drops_net_raw = (
            "(has(c.securityContext) && has(c.securityContext.capabilities) && "
            "has(c.securityContext.capabilities.drop) && "
            "c.securityContext.capabilities.drop.exists(x, x == 'NET_RAW' || x == 'ALL'))"
        )
        rules.append(
            (
                f"!{host_network} || variables.containers.all(c, {drops_net_raw})",
                "host-network pods must drop NET_RAW (or ALL) in every container in this namespace",
            )
        )
    else:
        rules.append((f"!{host_network}", "hostNetwork is not allowed in this namespace"))
    return [{"expression": expression, "message": message} for expression, message in rules]


CONTAINERS_VARIABLE = {
    "name": "containers",
    "expression": "object.spec.containers"
    " + (has(object.spec.initContainers) ? object.spec.initContainers : [])"
    " + (has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])",
}
"""Every container of the pod: ordinary, init and ephemeral (baseline checks all three)."""


def policy_name(namespace: str) -> str:
    return f"gpucluster-job-pods-{namespace}"


def render_job_pod_policy(namespace: str, exceptions: JobPodExceptions) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding to `namespace` (cluster-scoped objects)."""
    check_dns_label(namespace, "jobs namespace")
    name = policy_name(namespace)
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            # Fail closed: a pod the policy cannot judge is refused.
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        # Ephemeral containers arrive through their own subresource.
                        "resources": ["pods", "pods/ephemeralcontainers"],
                    }
                ]
            },
            "variables": [CONTAINERS_VARIABLE],
            "validations": _validations(exceptions),
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            },
        },
    }
    return [policy, binding]
