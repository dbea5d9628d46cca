"""The version policy, as data: each Kubernetes minor the bootstrap supports, its upstream end of
life, and what a stack runs with it (etcd, pause, CoreDNS, Calico, containerd).

`validate` and `plan` read it (`stacks.environment.version_policy`): a minor past its end of life is
a warning, a minor outside the table is refused naming the newest. The cluster upgrade writes the
etcd image tag of the target minor into the stored ClusterConfiguration (`etcd.local.imageTag`),
and the etcd gates (`components.k8s.etcd.versions`) compare the members against it.

End of life: kubernetes.io/releases and its patch-releases page publish each minor's date (1.32:
2026-02-28, 1.33: 2026-06-28, 1.34: 2026-10-27, 1.35: 2027-02-28, 1.36: 2027-06-28, 1.37:
2027-10-28). The last two as published: kubernetes/website data/releases/schedule.yaml (1.37's entry
added by kubernetes/website#57050, `endOfLifeDate: "2027-10-28"`), and the patch-releases page as
endoflife-date/endoflife.date#10834 quotes it: "the End of Life date for Kubernetes 1.36 is Jun 28,
2027" and "for Kubernetes 1.37 is Oct 28, 2027".

etcd: the tag the stack runs is kubeadm's pin (`components.k8s.kubeadm_pins`) unless etcd's
upgrade guide asks more of the line the next minor upgrades from:
- 3.5 (1.32, 1.33): 3.5.32-0. etcd-io/website content/en/docs/v3.6/upgrades/upgrade_3_6.md
  (2026-08) asks every 3.5 member to run 3.5.32 or later before 3.6; kubeadm pins 3.5.24 there.
  registry.k8s.io/etcd:3.5.32-0 is kubernetes/k8s.io#9672's promotion of v3.5.32 (2026-07; the
  `<version>-0` naming is the promotion script's, kubernetes/k8s.io#8530).
- 3.6 (1.34-1.36): 3.6.13-0 (kubernetes/k8s.io#9672). etcd.io/docs/v3.7/upgrades/upgrade_3_7:
  "make sure that all of your 3.6 members are updated to 3.6.11 or later"; kubeadm pins 3.6.10
  there (kubernetes/kubernetes#138392; older kubeadm patches 3.6.5 to 3.6.9).
- 3.7 (1.37): kubeadm's 3.7.0-0. etcd 3.7 removes the v2 store and publishes no per-architecture
  image tags: a mirror copies the multi-architecture manifest (`skopeo copy --all`).

Calico: a release this program pins (manifests/index.json) that Tigera tests on the minor
("System requirements for Kubernetes", docs.tigera.io/calico/3.NN/getting-started/kubernetes/
requirements: v3.31 on 1.32-1.35, v3.32 on 1.34-1.36, v3.33 on 1.35-1.37): v3.31.3 up to 1.35,
the default stacks there already run (a new default would change every existing stack's first-boot
data), v3.32.1 from 1.36. No pinned release is
tested on 1.37: v3.33's manifest is not in the stored sources, so its SHA-256 cannot be recorded
here; `calico` says so (None) and validate warns.

containerd: the floors are containerd's own table, RELEASES.md "Kubernetes Support"
(containerd/containerd main, 2026-08): per Kubernetes minor the oldest patch of each containerd line
it recommends (1.34: 2.1.3+, 2.0.6+, 1.7.28+, 1.6.39+; 1.35: 2.2.0+, 2.1.5+, 1.7.28+; 1.36: 2.3.0+,
2.2.0+). A line newer than every listed one passes (it was released after the row was written, as
2.3 after 1.35's); a listed line below its floor, or an unlisted older line, is refused. The table
has no 1.37 row yet: 1.37 takes 1.36's, and `containerd_floors_source` says so. The template pins
Docker's `containerd.io` to the 2.3 LTS line (templates/rocky9/ks.cfg: registry `config_path`
defaults to /etc/containerd/certs.d since 2.2; the sandbox image sits under `pinned_images` in config
version 3, which the bootstrap reads either way), and the node bootstrap refuses a containerd below
its minor's floor (`GPUCLUSTER_CONTAINERD_FLOORS`, components/k8s/node_bootstrap/env_file.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

from components.k8s.facts import SUPPORTED_KUBERNETES_MINORS
from components.k8s.kubeadm_pins import KubeadmPins, kubeadm_pins

TODAY_VARIABLE = "GPUCLUSTER_TODAY"
"""An ISO date (2026-11-27) that replaces the system's clock for the end-of-life check: tests set
it, and an operator can ask "what will validate say on that day"."""


@dataclass(frozen=True)
class MinorPolicy:
    minor: int
    end_of_life: date
    """Published by kubernetes.io/releases (module docstring)."""
    etcd: str
    """The registry.k8s.io/etcd tag the stack runs (the stored `etcd.local.imageTag`)."""
    calico: str | None
    """The newest pinned Calico that Tigera tests on this minor; None: none of the pinned ones."""
    containerd_floors: tuple[str, ...]
    """The oldest patch of each containerd line containerd's RELEASES.md recommends for this minor,
    newest line first (module docstring)."""
    containerd_line: str = "2.3"
    """The containerd line the template installs (its LTS; templates/rocky9/ks.cfg)."""

    @property
    def containerd_floors_source(self) -> str:
        """Where the floors come from, for messages: 1.37 has no row of its own yet."""
        own = self.minor in CONTAINERD_ROWS
        return "containerd RELEASES.md" + ("" if own else f", 1.{max(CONTAINERD_ROWS)}'s row: none for {self.line} yet")

    @property
    def kubeadm(self) -> KubeadmPins:
        return kubeadm_pins(self.minor)

    @property
    def line(self) -> str:
        return f"1.{self.minor}"


CONTAINERD_ROWS: Mapping[int, tuple[str, ...]] = {
    32: ("2.1.0", "2.0.1", "1.7.24", "1.6.36"),
    33: ("2.1.0", "2.0.4", "1.7.24", "1.6.36"),
    34: ("2.1.3", "2.0.6", "1.7.28", "1.6.39"),
    35: ("2.2.0", "2.1.5", "1.7.28"),
    36: ("2.3.0", "2.2.0"),
}
"""containerd RELEASES.md "Kubernetes Support", row by row (module docstring)."""

POLICY: Mapping[int, MinorPolicy] = {
    32: MinorPolicy(32, date(2026, 2, 28), etcd="3.5.32-0", calico="v3.31.3", containerd_floors=CONTAINERD_ROWS[32]),
    33: MinorPolicy(33, date(2026, 6, 28), etcd="3.5.32-0", calico="v3.31.3", containerd_floors=CONTAINERD_ROWS[33]),
    34: MinorPolicy(34, date(2026, 10, 27), etcd="3.6.13-0", calico="v3.31.3", containerd_floors=CONTAINERD_ROWS[34]),
    35: MinorPolicy(35, date(2027, 2, 28), etcd="3.6.13-0", calico="v3.31.3", containerd_floors=CONTAINERD_ROWS[35]),
    36: MinorPolicy(36, date(2027, 6, 28), etcd="3.6.13-0", calico="v3.32.1", containerd_floors=CONTAINERD_ROWS[36]),
    37: MinorPolicy(37, date(2027, 10, 28), etcd="3.7.0-0", calico=None, containerd_floors=CONTAINERD_ROWS[36]),
}
"""One entry per supported minor (a test holds it to `SUPPORTED_KUBERNETES_MINORS`)."""

NEWEST_MINOR = SUPPORTED_KUBERNETES_MINORS.stop - 1

NEWEST_PINNED_CALICO = "v3.32.1"
"""The newest Calico release manifests/index.json pins: the default where no pinned release is
tested on the minor (1.37; validate warns)."""


def minor_of(version: str) -> int:
    """`1.36.1` (or `v1.36.1`) -> 36."""
    return int(version.strip().lstrip("v").split(".")[1])


def policy_for(version_or_minor: str | int) -> MinorPolicy:
    """The policy of a Kubernetes version's minor; ValueError naming the newest when unsupported."""
    minor = version_or_minor if isinstance(version_or_minor, int) else minor_of(version_or_minor)
    try:
        return POLICY[minor]
    except KeyError:
        raise ValueError(unsupported_message(minor)) from None


def unsupported_message(minor: int) -> str:
    oldest = SUPPORTED_KUBERNETES_MINORS.start
    return (
        f"Kubernetes 1.{minor} is not supported by the bootstrap; use 1.{oldest} to 1.{NEWEST_MINOR} "
        f"(the newest is 1.{NEWEST_MINOR})"
    )


def default_calico(version: str) -> str | None:
    """The Calico a stack at `version` runs unless it sets `kubernetes.cni.version`: the policy's, or
    the newest pinned one where none pinned is tested on the minor (validate warns). None for a
    version that is not a supported one (its own check reports it)."""
    try:
        policy = policy_for(version)
    except (ValueError, IndexError):
        return None
    return policy.calico or NEWEST_PINNED_CALICO


def etcd_image_tag(version: str) -> str:
    """The etcd tag a cluster at `version` runs (`etcd.local.imageTag`)."""
    return policy_for(version).etcd


def today() -> date:
    """The date the end-of-life check uses: `GPUCLUSTER_TODAY` when set, else the system's."""
    fixed = os.environ.get(TODAY_VARIABLE)
    if fixed:
        try:
            return date.fromisoformat(fixed.strip())
        except ValueError:
            raise ValueError(f"{TODAY_VARIABLE}={fixed!r} is not a date like 2026-11-27") from None
    return date.today()


def end_of_life_warning(version: str, on: date | None = None) -> str | None:
    """A warning when `version`'s minor is past its upstream end of life on `on` (default: today())."""
    policy = policy_for(version)
    day = on or today()
    if day <= policy.end_of_life:
        return None
    newest = POLICY[NEWEST_MINOR]
    return (
        f"Kubernetes {policy.line} reached its end of life on {policy.end_of_life.isoformat()} "
        f"(kubernetes.io/releases): it gets no more patches, security fixes included; upgrade one minor at "
        f"a time towards {newest.line} (supported until {newest.end_of_life.isoformat()})"
    )


def summary(version: str, on: date | None = None) -> list[str]:
    """What the policy says of `version`, one line each, for `plan`."""
    policy = policy_for(version)
    day = on or today()
    state = "past its end of life" if day > policy.end_of_life else "supported"
    pins = policy.kubeadm
    calico = policy.calico or "none pinned is tested on it (Tigera tests v3.33; not pinned here)"
    return [
        f"Kubernetes {policy.line}: {state} on {day.isoformat()}; end of life {policy.end_of_life.isoformat()}",
        f"etcd {policy.etcd} (kubeadm pins {pins.etcd}), pause {pins.pause}, CoreDNS {pins.coredns}",
        f"Calico {calico}; containerd {containerd_floors_text(policy)} ({policy.containerd_floors_source}; "
        f"template: {policy.containerd_line} LTS)",
    ]


def containerd_floors_text(policy: MinorPolicy) -> str:
    """`2.3.0+, 2.2.0+`, as RELEASES.md writes a row."""
    return ", ".join(f"{floor}+" for floor in policy.containerd_floors)


def _release(text: str) -> tuple[int, int, int]:
    parts = [*text.split("."), "0", "0"][:3]
    return int(parts[0]), int(parts[1]), int(parts[2])


def containerd_refusal(version: str, kubernetes: str | int) -> str | None:
    """Why containerd `version` (2.2.1) is below what Kubernetes `kubernetes`'s minor needs; None
    when it is not. The node bootstrap applies the same rule to `containerd --version`
    (gpucluster-bootstrap.sh `check_containerd_version`)."""
    policy = policy_for(kubernetes)
    have = _release(version)
    floors = [_release(floor) for floor in policy.containerd_floors]
    if have[:2] > max(floors)[:2]:
        return None
    for floor in floors:
        if have[:2] != floor[:2]:
            continue
        if have >= floor:
            return None
        return (
            f"containerd {version} is older than {'.'.join(map(str, floor))}, the oldest {have[0]}.{have[1]} "
            f"patch {policy.containerd_floors_source} recommends for Kubernetes {policy.line} "
            f"({containerd_floors_text(policy)})"
        )
    return (
        f"containerd {version} is on the {have[0]}.{have[1]} line, which {policy.containerd_floors_source} does "
        f"not recommend for Kubernetes {policy.line} ({containerd_floors_text(policy)})"
    )
