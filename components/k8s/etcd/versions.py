"""Which etcd each Kubernetes minor brings, each member's running version, and the 3.5 -> 3.6 rule.

Every control-plane node of this stack is a new VM that runs `kubeadm join`, so its etcd is the one
kubeadm pins for the cluster's minor (`SupportedEtcdVersion` in kubernetes/kubernetes
cmd/kubeadm/app/constants/constants.go: release-1.32 maps 29-32 to "3.5.24-0"; release-1.34 maps
31-33 to "3.5.24-0" and 34 to "3.6.5-0"; master maps 34-36 to "3.6.9-0"). The Kubernetes minor
that moves the etcd minor line from 3.5 to 3.6 is therefore 1.34: its first new control-plane node
joins a 3.6 member to the 3.5 cluster, which is etcd's 3.5 -> 3.6 upgrade.

etcd's rule for that upgrade ("Avoiding Zombie Cluster Members When Upgrading to etcd v3.6",
etcd.io/blog/2025/zombie_members_upgrade, 2025-12-21, mirrored on the Kubernetes blog): every
member must run 3.5.26 or later first. 3.6 takes cluster membership from the v3 store instead of
the v2 store; in clusters that ran 3.5.25 or earlier the two can disagree, and members removed long
ago come back as "zombies" that join consensus and cost quorum. 3.5.26 repairs the v3 store from
the v2 store at start. This stack removes an etcd member on every control-plane replacement, so its
clusters are the ones exposed. There is no safe path around it ("you should delay upgrading to
v3.6"), so the upgrade step refuses until every member reports 3.5.26 or later.

A member's version is what it reports itself: `version` in `/v3/maintenance/status`
(etcdserverpb `StatusResponse.version`, served by every 3.x through the JSON gateway).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from components.k8s.etcd.gateway import MEMBER_LIST, MEMBER_STATUS, Gateway, Member

KUBEADM_ETCD_MINOR: dict[int, tuple[int, int]] = {32: (3, 5), 33: (3, 5), 34: (3, 6), 35: (3, 6)}
"""Per supported Kubernetes minor, the etcd minor line kubeadm runs (module docstring). A test holds
it to `SUPPORTED_KUBERNETES_MINORS`."""

SAFE_FOR_3_6 = (3, 5, 26)
"""The oldest etcd a member may run before a 3.6 member joins (module docstring)."""

PROCEDURE = (
    "before changing kubernetes.version, move every etcd member to 3.5.26 or later, one control-plane node at a "
    "time: on the node, set the image in /etc/kubernetes/manifests/etcd.yaml to registry.k8s.io/etcd:3.5.26-0 "
    "(or a later 3.5; your mirror's copy if you use one), wait until the kubelet has restarted it and "
    "`etcdctl endpoint health --cluster` is healthy, then the next node. Then run `pulumi up` again "
    "(etcd.io/blog/2025/zombie_members_upgrade: upgrade to 3.5.26, confirm every member is healthy, then 3.6)"
)


def etcd_minor_for(kubernetes_minor: int) -> tuple[int, int]:
    """The etcd line kubeadm runs for a Kubernetes minor; outside the table, the nearest entry (as
    kubeadm's `EtcdSupportedVersion` falls back to the nearest minor)."""
    known = sorted(KUBEADM_ETCD_MINOR)
    nearest = min(max(kubernetes_minor, known[0]), known[-1])
    return KUBEADM_ETCD_MINOR[nearest]


def crosses_into_3_6(current_minor: int, target_minor: int) -> bool:
    """Whether going from one Kubernetes minor to another joins the first etcd 3.6 member."""
    return etcd_minor_for(current_minor) < (3, 6) <= etcd_minor_for(target_minor)


def parse_etcd_version(text: str) -> tuple[int, int, int]:
    """`3.5.26` (or kubeadm's image tag `3.5.26-0`) -> (3, 5, 26); ValueError otherwise."""
    core = text.strip().split("-", 1)[0]
    parts = core.split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        raise ValueError(f"{text!r} is not an etcd version like 3.5.26")
    return int(parts[0]), int(parts[1]), int(parts[2])


@dataclass
class MemberVersions:
    versions: dict[str, str] = field(default_factory=dict)
    """Member label -> the version it reports."""
    unread: dict[str, str] = field(default_factory=dict)
    """Member label (or endpoint, when no member list came back) -> why its version is unknown."""


def read_member_versions(gateway: Gateway, endpoints: Sequence[str]) -> MemberVersions:
    """Every member's reported version: the member list from the first endpoint that answers, then
    each member's status from its own client URL (a learner too: it becomes a voter)."""
    found = MemberVersions()
    members: list[Member] | None = None
    for endpoint in endpoints:
        try:
            answer = gateway.post(endpoint, MEMBER_LIST, {})
        except OSError as error:
            found.unread[endpoint] = f"no answer to the member list ({error})"
            continue
        if answer.status == 200:
            members = [Member.from_json(raw) for raw in answer.body.get("members", [])]
            break
        found.unread[endpoint] = f"member list: HTTP {answer.status} {answer.message}".rstrip()
    if members is None:
        return found
    found.unread.clear()
    for member in members:
        why = "it has not started (no client URL)"
        for url in member.client_urls:
            try:
                answer = gateway.post(url, MEMBER_STATUS, {})
            except OSError as error:
                why = f"{url} did not answer ({error})"
                continue
            if answer.status == 200 and answer.body.get("version"):
                found.versions[member.label] = str(answer.body["version"])
                break
            why = f"{url}: HTTP {answer.status} {answer.message}".rstrip()
        else:
            found.unread[member.label] = why
    return found


def refusal_for_3_6(found: MemberVersions) -> str | None:
    """Why a 3.6 member may not join yet (members too old, or versions unknown); None when it may."""
    too_old = []
    for label, text in sorted(found.versions.items()):
        try:
            old = parse_etcd_version(text) < SAFE_FOR_3_6
        except ValueError:
            old = True
        if old:
            too_old.append(f"{label} runs {text}")
    problems = []
    if too_old:
        problems.append("etcd member(s) older than 3.5.26: " + ", ".join(too_old))
    if found.unread:
        problems.append(
            "etcd member version(s) could not be read: "
            + "; ".join(f"{k}: {v}" for k, v in sorted(found.unread.items()))
        )
    if not problems:
        return None
    return (
        "this Kubernetes minor runs etcd 3.6, and etcd 3.6 may only join members at 3.5.26 or later (older ones can "
        "bring removed members back as zombies and cost quorum); " + "; ".join(problems) + ". " + PROCEDURE
    )
