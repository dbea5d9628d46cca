"""The API server's hardening on a running cluster, for `stacks verify` (issue 40 item 3).

Two checks, each a verdict of its own:

- **flags**: every kube-apiserver static pod (kube-system, `component=kube-apiserver`: kubeadm's
  label, cmd/kubeadm/app/util/staticpod/utils.go `ComponentPod`) runs with the Pod Security
  defaults (`--admission-control-config-file`), the audit policy and log (`--audit-policy-file`,
  `--audit-log-path`) and Secrets encryption (`--encryption-provider-config`) at the paths the
  stack writes (components/k8s/node_bootstrap/api_server.py). The mirror pod shows the node's own
  manifest, so a control-plane node that joined without them (it read an old stored
  ClusterConfiguration) shows here by name.
- **Secrets at rest**: every Secret's value in etcd starts with `k8s:enc:secretbox:v1:` (the
  EncryptionConfiguration's secretbox provider; an unencrypted Secret starts with the API server's
  protobuf magic `k8s\\x00`). Read as the upstream page does it (kubernetes.io/docs/tasks/
  administer-cluster/encrypt-data, "Verify that newly written data is encrypted": `etcdctl get
  /registry/secrets/...` with the etcd CA and a client certificate), from inside an etcd static pod
  (kubeadm mounts /etc/kubernetes/pki/etcd into it; its image ships etcdctl), as JSON, so every
  Secret is judged, not one example. Secrets written before encryption was on (or by an API server
  without it) are named with the command that rewrites them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from components.k8s.node_bootstrap.api_server import api_server_extra_args
from stacks.kubectl import Kubectl, VerifyError
from stacks.tools.verify.logs import Verdict

SECRETBOX_PREFIX = b"k8s:enc:secretbox:v1:"
SECRETS_PREFIX = "/registry/secrets/"
"""The API server's etcd keys for Secrets: /registry/secrets/<namespace>/<name>."""
CHECKED_FLAGS = ("admission-control-config-file", "audit-policy-file", "audit-log-path", "encryption-provider-config")
ETCD_PKI = "/etc/kubernetes/pki/etcd"
REWRITE = "kubectl get secrets --all-namespaces -o json | kubectl replace -f -"


def expected_flags() -> dict[str, str]:
    wanted = {a["name"]: a["value"] for a in api_server_extra_args()}
    return {f"--{name}": wanted[name] for name in CHECKED_FLAGS}


def judge_api_server_flags(pods: Sequence[dict[str, Any]]) -> Verdict:
    """One line per kube-apiserver pod: its node and what of the hardening it lacks."""
    verdict = Verdict("API server hardening (flags)")
    if not pods:
        verdict.fail("no kube-apiserver pod in kube-system (label component=kube-apiserver)")
        return verdict
    wanted = expected_flags()
    for pod in sorted(pods, key=lambda p: str(p.get("spec", {}).get("nodeName"))):
        node = pod.get("spec", {}).get("nodeName") or pod.get("metadata", {}).get("name")
        containers = pod.get("spec", {}).get("containers") or [{}]
        args = [*containers[0].get("command", []), *containers[0].get("args", [])]
        given = dict(str(a).split("=", 1) for a in args if str(a).startswith("--") and "=" in str(a))
        wrong = [f"{flag}={value}" for flag, value in wanted.items() if given.get(flag) != value]
        if wrong:
            verdict.fail(f"{node}: lacks {', '.join(wrong)}; roll this control-plane node (pulumi up)")
        else:
            verdict.lines.append(f"{node}: Pod Security defaults, audit log and Secrets encryption on")
    return verdict


def etcdctl_secrets_command(endpoint: str, ca: str, cert: str, key: str) -> list[str]:
    """`etcdctl get` of every Secret's key and value, as JSON (keys and values base64)."""
    return [
        "etcdctl",
        f"--endpoints={endpoint}",
        f"--cacert={ca}",
        f"--cert={cert}",
        f"--key={key}",
        "--command-timeout=30s",
        "-w",
        "json",
        "get",
        SECRETS_PREFIX,
        "--prefix",
    ]


def unencrypted_secrets(etcd_json: dict[str, Any]) -> tuple[int, list[str]]:
    """From `etcdctl get -w json`: how many Secrets, and the `namespace/name` of those not under
    secretbox."""
    plain = []
    kvs = etcd_json.get("kvs") or []
    for kv in kvs:
        key = base64.b64decode(kv.get("key", "")).decode(errors="replace")
        value = base64.b64decode(kv.get("value", ""))
        if not value.startswith(SECRETBOX_PREFIX):
            plain.append(key.removeprefix(SECRETS_PREFIX))
    return len(kvs), sorted(plain)


def judge_secrets_at_rest(etcd_json: dict[str, Any]) -> Verdict:
    verdict = Verdict("API server hardening (Secrets in etcd)")
    total, plain = unencrypted_secrets(etcd_json)
    if plain:
        shown = ", ".join(plain[:10]) + (f" and {len(plain) - 10} more" if len(plain) > 10 else "")
        verdict.fail(
            f"{len(plain)} of {total} Secrets are not encrypted in etcd ({shown}): written before encryption was "
            f"on, or by an API server without it; once every API server has it, rewrite them: {REWRITE}"
        )
    else:
        verdict.lines.append(f"all {total} Secrets in etcd start with {SECRETBOX_PREFIX.decode()}")
    return verdict


def read_etcd_secrets(kubectl: Kubectl) -> dict[str, Any]:
    """`etcdctl get` run in a running etcd static pod, with its own healthcheck client certificate."""
    pods = [
        p
        for p in kubectl.items("get", "pods", "--selector", "component=etcd", namespace="kube-system")
        if p.get("status", {}).get("phase") == "Running"
    ]
    if not pods:
        raise VerifyError("no running etcd pod in kube-system (label component=etcd): is etcd external?")
    name = str(pods[0]["metadata"]["name"])
    command = etcdctl_secrets_command(
        "https://127.0.0.1:2379",
        f"{ETCD_PKI}/ca.crt",
        f"{ETCD_PKI}/healthcheck-client.crt",
        f"{ETCD_PKI}/healthcheck-client.key",
    )
    result = kubectl.run("exec", name, "--container", "etcd", "--", *command, namespace="kube-system")
    if result.returncode != 0:
        raise VerifyError(f"etcdctl in pod kube-system/{name}: {result.stderr.strip()}")
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def hardening_verdicts(kubectl: Kubectl) -> list[Verdict]:
    pods = kubectl.items("get", "pods", "--selector", "component=kube-apiserver", namespace="kube-system")
    verdicts = [judge_api_server_flags(pods)]
    try:
        verdicts.append(judge_secrets_at_rest(read_etcd_secrets(kubectl)))
    except VerifyError as error:
        failed = Verdict("API server hardening (Secrets in etcd)")
        failed.fail(str(error))
        verdicts.append(failed)
    return verdicts
