"""Issue 37 item 3: what a namespace editor can run in the jobs' namespace of a RoCE or TCP stack.

Admission is simulated from the rendered objects: the namespace's Pod Security `enforce` level,
then every ValidatingAdmissionPolicy whose binding selects the namespace, its CEL evaluated by
cel-python (the expressions use only CEL's standard macros and functions). Pod Security
`baseline` itself is judged by the same checks with no exceptions (pod_policy.py lists them from
the Pod Security Standards). The pods judged are the ones the stack renders (MPIJob launcher and
workers) and the ones an editor must not get (privileged, hostPath `/`, host namespaces, ...).
"""

from __future__ import annotations

import copy
from typing import Any

import celpy
import pytest

from components.k8s.jobs import BenchmarkJob, FabricCheckJob, TrainingJobsArgs
from components.k8s.jobs.pod_policy import JobPodExceptions, render_job_pod_policy
from components.k8s.jobs.pods import WorkerShape
from components.k8s.jobs.training_jobs import render_training_guard, render_training_namespace
from tests.components.k8s.addons.k8s_checks import validate_strict

NAMESPACE = "training"
_CEL = celpy.Environment()


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    return _CEL.program(_CEL.compile(expression)).evaluate(activation)


def policy_denials(policy: dict[str, Any], pod: dict[str, Any], *, operation: str = "CREATE") -> list[str]:
    """The messages of `policy`'s validations that `pod` fails, as the API server evaluates them
    (`request` carries the operation, as the API server's admission request does)."""
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(pod),
        "request": celpy.json_to_cel({"operation": operation}),
    }
    variables = {v["name"]: _evaluate(v["expression"], activation) for v in policy["spec"].get("variables", [])}
    activation["variables"] = celpy.celtypes.MapType({celpy.celtypes.StringType(k): v for k, v in variables.items()})
    refused = []
    for validation in policy["spec"]["validations"]:
        result = _evaluate(validation["expression"], activation)
        # An expression that errs refuses the pod too (failurePolicy Fail); say so, to tell it apart.
        if isinstance(result, celpy.CELEvalError):
            refused.append(f"{validation['message']} (error: {result})")
        elif result != celpy.celtypes.BoolType(True):
            refused.append(validation["message"])
    return refused


def admission(objects: list[dict[str, Any]], pod: dict[str, Any], *, operation: str = "CREATE") -> list[str]:
    """Why the API server would refuse `pod` in NAMESPACE given `objects` (empty: admitted)."""
    [ns] = [o for o in objects if o["kind"] == "Namespace"]
    labels = {**ns["metadata"]["labels"], "kubernetes.io/metadata.name": ns["metadata"]["name"]}
    level = labels["pod-security.kubernetes.io/enforce"]
    refused: list[str] = []
    if level == "baseline":
        [baseline, _] = render_job_pod_policy(NAMESPACE, JobPodExceptions())
        refused += [f"PodSecurity baseline: {m}" for m in policy_denials(baseline, pod)]
    else:
        assert level == "privileged", level
    policies = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"}
    for binding in (o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"):
        selector = binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"]
        if all(labels.get(k) == v for k, v in selector.items()) and "Deny" in binding["spec"]["validationActions"]:
            refused += policy_denials(policies[binding["spec"]["policyName"]], pod, operation=operation)
    return refused


def stack_objects(transport: str) -> list[dict[str, Any]]:
    args = TrainingJobsArgs(
        provider=None,  # type: ignore[arg-type]
        fabric_check=FabricCheckJob(workers=2, shape=WorkerShape(transport=transport)),  # type: ignore[arg-type]
    )
    return [render_training_namespace(args), *render_training_guard(args)]


def rendered_pods(transport: str) -> dict[str, dict[str, Any]]:
    """The MPIJob's launcher and worker pods as the API server sees them (hostPort defaulted to
    containerPort on host-network pods, as the core API's defaulting does)."""
    job = FabricCheckJob(workers=2, shape=WorkerShape(transport=transport))  # type: ignore[arg-type]
    from components.k8s.jobs.fabric_check import render_fabric_check_objects

    [mpijob] = [o for o in render_fabric_check_objects(job) if o["kind"] == "MPIJob"]
    pods = {}
    for role, replica in mpijob["spec"]["mpiReplicaSpecs"].items():
        template = copy.deepcopy(replica["template"])
        if template["spec"].get("hostNetwork"):
            for container in template["spec"]["containers"]:
                for port in container.get("ports", []):
                    port.setdefault("hostPort", port["containerPort"])
        pods[role] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"namespace": NAMESPACE, **template.get("metadata", {})},
            "spec": template["spec"],
        }
    return pods


def editor_pod(**spec: Any) -> dict[str, Any]:
    pod_spec = {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": NAMESPACE}, "spec": pod_spec}


def with_container(**container: Any) -> dict[str, Any]:
    return editor_pod(containers=[{"name": "c", "image": "busybox:1.36", **container}])


ESCAPES = {
    "privileged hostPath /": editor_pod(
        containers=[
            {
                "name": "c",
                "image": "busybox:1.36",
                "securityContext": {"privileged": True},
                "volumeMounts": [{"name": "host", "mountPath": "/host"}],
            }
        ],
        volumes=[{"name": "host", "hostPath": {"path": "/"}}],
    ),
    "privileged": with_container(securityContext={"privileged": True}),
    "hostPath /": editor_pod(volumes=[{"name": "host", "hostPath": {"path": "/"}}]),
    "hostPID": editor_pod(hostPID=True),
    "hostIPC": editor_pod(hostIPC=True),
    "SYS_ADMIN": with_container(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}}),
    "init container SYS_PTRACE": editor_pod(
        initContainers=[
            {"name": "i", "image": "busybox:1.36", "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}
        ]
    ),
    "hostPort": with_container(ports=[{"containerPort": 10250, "hostPort": 10250}]),
    "seccomp Unconfined": editor_pod(securityContext={"seccompProfile": {"type": "Unconfined"}}),
    "AppArmor unconfined": with_container(securityContext={"appArmorProfile": {"type": "Unconfined"}}),
    "SELinux spc_t": with_container(securityContext={"seLinuxOptions": {"type": "spc_t"}}),
    "SELinux user": editor_pod(securityContext={"seLinuxOptions": {"user": "system_u"}}),
    "procMount Unmasked": with_container(securityContext={"procMount": "Unmasked"}),
    "unsafe sysctl": editor_pod(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}),
}


@pytest.mark.parametrize("transport", ["roce", "tcp"])
@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_a_namespace_editor_cannot_escape_to_the_node(transport: str, escape: str) -> None:
    """Anyone who may create an MPIJob (or a pod) in the jobs' namespace gets baseline plus the
    transport's exception, not a privileged pod with the node's file system."""
    refused = admission(stack_objects(transport), ESCAPES[escape])
    assert refused, f"{escape} admitted in the {transport} stack's {NAMESPACE} namespace"
    assert "(error:" not in " ".join(refused), refused


def test_host_network_only_where_the_transport_needs_it() -> None:
    host_network = host_network_pod(drop=["NET_RAW"])
    assert "hostNetwork is not allowed in this namespace" in admission(stack_objects("roce"), host_network)
    assert admission(stack_objects("tcp"), host_network) == []


def test_ipc_lock_only_where_the_transport_needs_it() -> None:
    ipc_lock = with_container(securityContext={"capabilities": {"add": ["IPC_LOCK"]}})
    assert admission(stack_objects("roce"), ipc_lock) == []
    refused = admission(stack_objects("tcp"), ipc_lock)
    assert "PodSecurity" not in " ".join(refused)  # the tcp namespace is privileged for hostNetwork
    assert "containers may add only baseline's capabilities in this namespace" in refused


@pytest.mark.parametrize("transport", ["roce", "tcp"])
def test_the_stacks_own_job_pods_are_admitted(transport: str) -> None:
    for role, pod in rendered_pods(transport).items():
        assert admission(stack_objects(transport), pod) == [], role


def test_baseline_pods_and_baseline_capabilities_are_admitted() -> None:
    plain = with_container(securityContext={"capabilities": {"add": ["NET_BIND_SERVICE"]}, "runAsUser": 0})
    for transport in ("roce", "tcp"):
        assert admission(stack_objects(transport), plain) == []


def test_the_policy_objects_are_valid_and_bound_to_the_jobs_namespace_only() -> None:
    for transport in ("roce", "tcp"):
        objects = stack_objects(transport)
        for obj in objects:
            validate_strict(obj)
        [binding] = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"]
        assert binding["spec"]["matchResources"]["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}
        }
        [policy] = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"]
        assert policy["spec"]["failurePolicy"] == "Fail"


def test_a_stack_whose_pods_fit_baseline_gets_no_policy() -> None:
    args = TrainingJobsArgs(provider=None, benchmark=BenchmarkJob(workers=2, shape=WorkerShape(transport="roce")))  # type: ignore[arg-type]
    kinds = [o["kind"] for o in render_training_guard(args)]
    assert "ValidatingAdmissionPolicy" in kinds  # roce: IPC_LOCK
    none = TrainingJobsArgs(provider=None)  # type: ignore[arg-type]
    assert render_training_namespace(none)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert [o["kind"] for o in render_training_guard(none)] == ["NetworkPolicy"]


def test_job_pods_accept_connections_only_from_their_own_namespace() -> None:
    [policy] = [o for o in stack_objects("roce") if o["kind"] == "NetworkPolicy"]
    assert policy["metadata"]["namespace"] == NAMESPACE
    assert policy["spec"]["podSelector"] == {} and policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {}}]}]


# --- the tuning sample's namespace (Katib trials as TrainJobs) ---------------------------------
def tuning_objects(transport: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The tuning namespace's objects and a trial's trainer pod as the API server sees it."""
    from components.k8s.jobs.trainjob import TuningSampleJob, render_tuning_objects
    from components.k8s.jobs.tuning_sample import render_tuning_namespace, render_tuning_pod_policy
    from stacks.tools.plan.admission.trainer import trainer_pods

    job = TuningSampleJob(namespace="tuning", shape=WorkerShape(gpus=1, transport=transport), katib=True)  # type: ignore[arg-type]
    objs = render_tuning_objects(job)
    [experiment] = [o for o in objs if o["kind"] == "Experiment"]
    _, spec = trainer_pods(experiment["spec"]["trialTemplate"]["trialSpec"]["spec"], "tuning", objs)  # type: ignore[misc]
    spec = copy.deepcopy(spec)
    if spec.get("hostNetwork"):
        for container in spec["containers"]:
            for port in container.get("ports", []):
                port.setdefault("hostPort", port["containerPort"])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trial", "namespace": "tuning"}, "spec": spec}
    return [render_tuning_namespace(job), *render_tuning_pod_policy(job)], pod


@pytest.mark.parametrize("transport", ["roce", "tcp"])
def test_the_tuning_namespace_admits_its_trials_and_refuses_escapes(transport: str) -> None:
    objects, trial = tuning_objects(transport)
    assert admission(objects, trial) == []
    for escape, pod in ESCAPES.items():
        assert admission(objects, pod), f"{escape} admitted in the {transport} tuning namespace"


# --- issue 40 item 7: host-network pods without NET_RAW, no nodeName past the taints ------------
def host_network_pod(*, drop: list[str] | None, ephemeral_drop: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "busybox:1.36"}
    if drop is not None:
        container["securityContext"] = {"capabilities": {"drop": drop}}
    pod = editor_pod(hostNetwork=True, containers=[container])
    if ephemeral_drop is not None:
        debug: dict[str, Any] = {"name": "debug", "image": "busybox:1.36"}
        if ephemeral_drop:
            debug["securityContext"] = {"capabilities": {"drop": ephemeral_drop}}
        pod["spec"]["ephemeralContainers"] = [debug]
    return pod


NET_RAW_MESSAGE = "host-network pods must drop NET_RAW (or ALL) in every container in this namespace"


def test_a_host_network_pod_must_drop_net_raw() -> None:
    """A host-network pod with NET_RAW (containerd grants it by default) could sniff and spoof the
    node's management and RDMA segments; in the TCP stack it must drop it, in every container."""
    objects = stack_objects("tcp")
    assert NET_RAW_MESSAGE in admission(objects, host_network_pod(drop=None))
    assert NET_RAW_MESSAGE in admission(objects, host_network_pod(drop=["SYS_ADMIN"]))
    assert NET_RAW_MESSAGE in admission(
        objects, host_network_pod(drop=["NET_RAW"], ephemeral_drop=[]), operation="UPDATE"
    )
    assert admission(objects, host_network_pod(drop=["NET_RAW"])) == []
    assert admission(objects, host_network_pod(drop=["ALL"])) == []
    # A pod on the pod network keeps containerd's defaults: its NET_RAW reaches only its own netns.
    assert admission(objects, editor_pod()) == []


NODE_NAME_MESSAGE = "nodeName may not be set when a pod is created in this namespace; use a nodeSelector"


@pytest.mark.parametrize("transport", ["roce", "tcp"])
def test_node_name_is_refused_on_create(transport: str) -> None:
    """`spec.nodeName` skips the scheduler and with it the control-plane nodes' taints."""
    pinned = editor_pod(nodeName="cp-1")
    assert NODE_NAME_MESSAGE in admission(stack_objects(transport), pinned)
    # The scheduler's binding sets nodeName; later updates (ephemeral containers) carry it.
    assert admission(stack_objects(transport), pinned, operation="UPDATE") == []


def test_the_tuning_namespace_refuses_node_name_and_net_raw_too() -> None:
    objects, _ = tuning_objects("tcp")
    assert NODE_NAME_MESSAGE in admission(objects, editor_pod(nodeName="cp-1"))
    assert NET_RAW_MESSAGE in admission(objects, host_network_pod(drop=None))
