"""Which etcd each Kubernetes minor runs, each member's running version, and the gates between etcd lines.

Every control-plane node of this stack is a new VM that runs `kubeadm join`, so its etcd is the
image the stored ClusterConfiguration names: `etcd.local.imageTag` when set (kubeadm
`images.GetEtcdImage`), else kubeadm's pin for the minor (`SupportedEtcdVersion` in
kubernetes/kubernetes cmd/kubeadm/app/constants/constants.go). The cluster upgrade writes the
stack's own tag there (`components.k8s.version_policy`, as Cluster API's KubeadmControlPlane keeps
`etcd.local.imageTag` in the ClusterConfiguration it manages), so a replacement joins with the same
etcd as the members it replaces. The first new control-plane node after a change of etcd line
(3.5 -> 3.6 with Kubernetes 1.34, 3.6 -> 3.7 with 1.37) is therefore etcd's minor upgrade.

etcd's rule for each (its upgrade guides, "Upgrade checklists"):
- 3.5 -> 3.6: every 3.5 member on 3.5.32 or later first (etcd-io/website
  content/en/docs/v3.6/upgrades/upgrade_3_6.md, changed 2026-08; the 3.5.26 rule of
  etcd.io/blog/2025/zombie_members_upgrade, 2025-12-21, came before it). 3.6 takes membership from
  the v3 store; in clusters that ran older 3.5 patches the v2 and v3 stores can disagree and removed
  members come back as "zombies". This stack removes an etcd member on every control-plane
  replacement, so its clusters are the ones exposed.
- 3.6 -> 3.7: every 3.6 member on 3.6.11 or later first (etcd.io/docs/v3.7/upgrades/upgrade_3_7:
  "Earlier 3.6 patch releases may not be compatible with a rolling upgrade to 3.7").
The upgrade step refuses a change of line until every member reports the floor or later. kubeadm's
own pins (3.5.24 for 1.32/1.33; 3.6.10 for 1.34-1.36, 3.6.5-3.6.9 from older kubeadm patches) are
below both floors; the stack's tags are not, so a cluster the stack has rolled once at its current minor passes by `pulumi up` alone.

A member's version is what it reports itself: `version` in `/v3/maintenance/status`
(etcdserverpb `StatusResponse.version`, served by every 3.x through the JSON gateway).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from components.k8s.etcd.gateway import MEMBER_LIST, MEMBER_STATUS, Gateway, Member
from components.k8s.version_policy import POLICY

UPGRADE_FLOORS: dict[tuple[int, int], tuple[int, int, int]] = {(3, 6): (3, 5, 32), (3, 7): (3, 6, 11)}
"""Per etcd minor line, the oldest version every member must run before the first member of that
line joins (module docstring): 3.5 -> 3.6 at 3.5.32, 3.6 -> 3.7 at 3.6.11."""

GUIDES: dict[tuple[int, int], str] = {
    (3, 6): "etcd.io/docs/v3.6/upgrades/upgrade_3_6 (etcd-io/website content/en/docs/v3.6/upgrades/upgrade_3_6.md)",
    (3, 7): "etcd.io/docs/v3.7/upgrades/upgrade_3_7",
}
WHY: dict[tuple[int, int], str] = {
    (3, 6): "older 3.5 members can bring removed members back as zombies and cost quorum, or turn voters into "
    "learners",
    (3, 7): "earlier 3.6 patch releases may not be compatible with a rolling upgrade to 3.7",
}


def etcd_line(tag: str) -> tuple[int, int]:
    """`3.6.13-0` -> (3, 6)."""
    major, minor, _ = parse_etcd_version(tag)
    return major, minor


def etcd_minor_for(kubernetes_minor: int) -> tuple[int, int]:
    """The etcd line a stack at a Kubernetes minor runs (`version_policy`); outside the table, the
    nearest entry (as kubeadm's `EtcdSupportedVersion` falls back to the nearest minor)."""
    known = sorted(POLICY)
    nearest = min(max(kubernetes_minor, known[0]), known[-1])
    return etcd_line(POLICY[nearest].etcd)


def new_line(current_tag: str, target_tag: str) -> tuple[int, int] | None:
    """The etcd line a change from `current_tag` to `target_tag` brings its first member of, or None
    when it stays on its line (or goes back, which the version rules refuse before this)."""
    old, new = etcd_line(current_tag), etcd_line(target_tag)
    return new if new > old else None


def crosses_into_3_6(current_minor: int, target_minor: int) -> bool:
    """Whether going from one Kubernetes minor to another joins the first etcd 3.6 member."""
    return etcd_minor_for(current_minor) < (3, 6) <= etcd_minor_for(target_minor)


def procedure(line: tuple[int, int]) -> str:
    floor = ".".join(map(str, UPGRADE_FLOORS[line]))
    previous = f"{line[0]}.{line[1] - 1}"
    return (
        f"keep kubernetes.version at its current minor and run `pulumi up` with this program: it writes the etcd "
        f"image tag of that minor (the stored ClusterConfiguration's etcd.local.imageTag, {previous}.x at {floor} or "
        f"later) and replaces the control-plane nodes one at a time, which join with it; then change "
        f"kubernetes.version again ({GUIDES[line]}: every {previous} member at {floor} or later, all healthy, then "
        f"{line[0]}.{line[1]})"
    )


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


def refusal_for(line: tuple[int, int], found: MemberVersions) -> str | None:
    """Why a member of etcd `line` may not join yet (members too old, or versions unknown); None when it may."""
    floor = UPGRADE_FLOORS.get(line)
    if floor is None:
        return None
    floor_text, line_text = ".".join(map(str, floor)), f"{line[0]}.{line[1]}"
    too_old = []
    for label, text in sorted(found.versions.items()):
        try:
            old = parse_etcd_version(text) < floor
        except ValueError:
            old = True
        if old:
            too_old.append(f"{label} runs {text}")
    problems = []
    if too_old:
        problems.append(f"etcd member(s) older than {floor_text}: " + ", ".join(too_old))
    if found.unread:
        problems.append(
            "etcd member version(s) could not be read: "
            + "; ".join(f"{k}: {v}" for k, v in sorted(found.unread.items()))
        )
    if not problems:
        return None
    return (
        f"this change brings etcd {line_text}, and etcd {line_text} may only join members at {floor_text} or later "
        f"({WHY[line]}); " + "; ".join(problems) + ". " + procedure(line)
    )


def refusal_for_3_6(found: MemberVersions) -> str | None:
    """`refusal_for((3, 6), found)`."""
    return refusal_for((3, 6), found)
