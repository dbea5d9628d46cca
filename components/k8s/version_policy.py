"""The version policy, as data: each Kubernetes minor the bootstrap supports, its upstream end of
life, and what a stack runs with it (etcd, pause, CoreDNS, Calico, containerd).

`validate` and `plan` read it (`stacks.environment.version_policy`): a minor past its end of life is
a warning, a minor outside the table is refused naming the newest. The cluster upgrade writes the
etcd image tag of the target minor into the stored ClusterConfiguration (`etcd.local.imageTag`),
and the etcd gates (`components.k8s.etcd.versions`) compare the members against it.

End of life: kubernetes.io/releases lists each minor's date (1.32: 2026-02-28, 1.33: 2026-06-28,
1.34: 2026-10-27, 1.35: 2027-02-28). For 1.36 (April 2026) and 1.37 (1.37.0 August 2026) the
stored corpora hold no end-of-life date: they are computed as upstream's rule gives them ("roughly
fourteen (14) months" of patches, kubernetes/website content/en/releases/patch-releases.md,
"Support Period"), on the 28th as upstream sets its dates, and marked `estimated`.

etcd: the tag the stack runs is kubeadm's pin (`components.k8s.kubeadm_pins`) unless etcd's
upgrade guide asks more of the line the next minor upgrades from:
- 3.5 (1.32, 1.33): 3.5.32-0. etcd-io/website content/en/docs/v3.6/upgrades/upgrade_3_6.md
  (2026-08) asks every 3.5 member to run 3.5.32 or later before 3.6; kubeadm pins 3.5.24 there.
  registry.k8s.io/etcd:3.5.32-0 is kubernetes/k8s.io#9672's promotion of v3.5.32 (2026-07; the
  `<version>-0` naming is the promotion script's, kubernetes/k8s.io#8530).
- 3.6 (1.34-1.36): 3.6.13-0 (kubernetes/k8s.io#9672). etcd.io/docs/v3.7/upgrades/upgrade_3_7:
  "make sure that all of your 3.6 members are updated to 3.6.11 or later"; kubeadm pins 3.6.5 to
  3.6.9 there.
- 3.7 (1.37): kubeadm's 3.7.0-0. etcd 3.7 removes the v2 store and publishes no per-architecture
  image tags: a mirror copies the multi-architecture manifest (`skopeo copy --all`).

Calico: a release this program pins (manifests/index.json) that Tigera tests on the minor
("System requirements for Kubernetes", docs.tigera.io/calico/3.NN/getting-started/kubernetes/
requirements: v3.31 on 1.32-1.35, v3.32 on 1.34-1.36, v3.33 on 1.35-1.37): v3.31.3 up to 1.35,
the default stacks there already run (a new default would change every existing stack's first-boot
data), v3.32.1 from 1.36. No pinned release is
tested on 1.37: v3.33's manifest is not in the stored sources, so its SHA-256 cannot be recorded
here; `calico` says so (None) and validate warns.

containerd: Kubernetes 1.35 is the last minor that supports containerd 1.x (the 1.35 release
notes, "final call for containerd v1.X"); 1.36 and later need 2.0 or later. The template installs
Docker's `containerd.io`, whose current LTS line is 2.3 (registry `config_path` defaults to
/etc/containerd/certs.d since 2.2; the sandbox image sits under `pinned_images` in config version
3, which the bootstrap reads either way).
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
    estimated_end_of_life: bool
    """True where the date is upstream's rule applied, not a published date (module docstring)."""
    etcd: str
    """The registry.k8s.io/etcd tag the stack runs (the stored `etcd.local.imageTag`)."""
    calico: str | None
    """The newest pinned Calico that Tigera tests on this minor; None: none of the pinned ones."""
    containerd_minimum: str
    """The oldest containerd this minor's kubelet supports."""
    containerd_line: str = "2.3"
    """The containerd line the template installs (its LTS)."""

    @property
    def kubeadm(self) -> KubeadmPins:
        return kubeadm_pins(self.minor)

    @property
    def line(self) -> str:
        return f"1.{self.minor}"


POLICY: Mapping[int, MinorPolicy] = {
    32: MinorPolicy(32, date(2026, 2, 28), False, etcd="3.5.32-0", calico="v3.31.3", containerd_minimum="1.7"),
    33: MinorPolicy(33, date(2026, 6, 28), False, etcd="3.5.32-0", calico="v3.31.3", containerd_minimum="1.7"),
    34: MinorPolicy(34, date(2026, 10, 27), False, etcd="3.6.13-0", calico="v3.31.3", containerd_minimum="1.7"),
    35: MinorPolicy(35, date(2027, 2, 28), False, etcd="3.6.13-0", calico="v3.31.3", containerd_minimum="1.7"),
    36: MinorPolicy(36, date(2027, 6, 28), True, etcd="3.6.13-0", calico="v3.32.1", containerd_minimum="2.0"),
    37: MinorPolicy(37, date(2027, 10, 28), True, etcd="3.7.0-0", calico=None, containerd_minimum="2.0"),
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
        f"a time towards {newest.line} (supported until {newest.end_of_life.isoformat()}"
        f"{', estimated' if newest.estimated_end_of_life else ''})"
    )


def summary(version: str, on: date | None = None) -> list[str]:
    """What the policy says of `version`, one line each, for `plan`."""
    policy = policy_for(version)
    day = on or today()
    state = "past its end of life" if day > policy.end_of_life else "supported"
    estimated = " (estimated: upstream's 14 months)" if policy.estimated_end_of_life else ""
    pins = policy.kubeadm
    calico = policy.calico or "none pinned is tested on it (Tigera tests v3.33; not pinned here)"
    return [
        f"Kubernetes {policy.line}: {state} on {day.isoformat()}; end of life {policy.end_of_life.isoformat()}{estimated}",
        f"etcd {policy.etcd} (kubeadm pins {pins.etcd}), pause {pins.pause}, CoreDNS {pins.coredns}",
        f"Calico {calico}; containerd {policy.containerd_minimum} or later (template: {policy.containerd_line} LTS)",
    ]
