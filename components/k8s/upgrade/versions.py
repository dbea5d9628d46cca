"""Kubernetes versions: parsing, the upgrade rules, and what kubeadm pins for each minor.

Pure: the stack's validation (`plan --against`, `validate --against`) and the cluster upgrade step
(`components.k8s.upgrade.upgrade`) apply the same rules, so a jump refused offline is refused
against the live cluster too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.k8s.facts import SUPPORTED_KUBERNETES_MINORS
from components.k8s.kubeadm_pins import kubeadm_pins

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")

KUBEADM_COREDNS_VERSIONS: dict[int, str] = {minor: kubeadm_pins(minor).coredns for minor in SUPPORTED_KUBERNETES_MINORS}
"""The CoreDNS kubeadm deploys and upgrades to, per supported Kubernetes minor: `CoreDNSVersion` in
kubernetes/kubernetes cmd/kubeadm/app/constants/constants.go on each release branch
(`components.k8s.kubeadm_pins` says where each was read)."""


class VersionError(ValueError):
    """Not a Kubernetes release like 1.34.2."""


@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str) -> Version:
        match = _VERSION.match(text.strip())
        if match is None:
            raise VersionError(f"{text!r} is not a Kubernetes release like 1.34.2")
        return cls(*(int(part) for part in match.groups()))

    @property
    def tag(self) -> str:
        """As kubeadm and the images write it: `v1.35.0`."""
        return f"v{self}"

    @property
    def minor_line(self) -> str:
        """`1.35`."""
        return f"{self.major}.{self.minor}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def upgrade_refusal(current: str, target: str) -> str | None:
    """Why a cluster at `current` cannot go to `target` in one change, with the fix; None when it can.

    One minor at a time: kubeadm upgrades a control plane only from the previous minor
    (`MinimumControlPlaneVersion = getSkewedKubernetesVersion(-1)`, kubernetes/kubernetes
    cmd/kubeadm/app/constants/constants.go) and the version skew policy allows kube-apiservers one
    minor apart while they are rolled (https://kubernetes.io/releases/version-skew-policy/). No
    downgrades: kubeadm has none, and etcd's and the API's storage may already be newer.
    """
    old, new = Version.parse(current), Version.parse(target)
    if new < old:
        return (
            f"{old} -> {new} is a downgrade, which Kubernetes and kubeadm do not support (the API server may "
            f"already have stored objects in {old.minor_line}'s versions); keep {old}, or build a new cluster "
            f"at {new} and move the workloads"
        )
    if new.major != old.major or new.minor > old.minor + 1:
        step = Version(old.major, old.minor + 1, 0).minor_line
        return (
            f"{old} -> {new} skips a minor: kubeadm upgrades a control plane one minor at a time and the version "
            f"skew policy allows API servers only one minor apart; upgrade through {step} first (set {step}.x, "
            f"run `pulumi up`, then {new.minor_line})"
        )
    return None


def coredns_version(version: str) -> str:
    """The CoreDNS tag kubeadm pins for `version`'s minor."""
    parsed = Version.parse(version)
    try:
        return KUBEADM_COREDNS_VERSIONS[parsed.minor]
    except KeyError:
        supported = f"1.{SUPPORTED_KUBERNETES_MINORS.start}-1.{SUPPORTED_KUBERNETES_MINORS.stop - 1}"
        raise VersionError(
            f"no CoreDNS version known for Kubernetes {parsed.minor_line} (supported: {supported})"
        ) from None


def with_tag(image: str, tag: str) -> str:
    """`image` with its tag (and any digest) replaced by `tag`, keeping its registry and path: a
    cluster pulling from a mirror keeps pulling from it."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: name.rindex(":")]
    return f"{name}:{tag}"
