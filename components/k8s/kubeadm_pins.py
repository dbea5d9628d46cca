"""The images kubeadm itself pins for each Kubernetes minor: etcd, pause and CoreDNS.

Each is a constant in kubernetes/kubernetes `cmd/kubeadm/app/constants/constants.go` on the minor's
release branch (`SupportedEtcdVersion[minor]`, `PauseVersion`, `CoreDNSVersion`), spelled as there:
etcd with kubeadm's image revision suffix (`3.6.5-0`, the tag under registry.k8s.io/etcd), pause
bare (`3.10.1`), CoreDNS with its `v` (`v1.12.1`). `kubeadm config images list` prints these.

Where each value was read (the project's stored copies of upstream; see docs/versions.md):
- 1.32: release-1.32 constants.go as stored: `SupportedEtcdVersion` 29-32 -> "3.5.24-0",
  `PauseVersion = "3.10"`, `CoreDNSVersion = "v1.11.3"`.
- 1.33: etcd "3.5.24-0" (kubernetes/kubernetes#134779 moved 1.32-1.34's 3.5 pin to 3.5.24);
  CoreDNS "v1.12.0" (coredns/deployment#306: "kubeadm v1.33 has started using coredns v1.12.0");
  pause "3.10" (unchanged from 1.32).
- 1.34-1.36: etcd "3.6.10-0": kubernetes/kubernetes#138392 (merged 2026-04, release note
  "kubeadm: updated the supported etcd version to v3.6.10 for supported control plane versions
  v1.34, v1.35, and v1.36"; the stored sources hold that PR, not the release branches' cherry-picks,
  so which patch release first ships it is not recorded here); before it 3.6.5 (1.34), 3.6.6 (1.35,
  #135271) and 3.6.9 (1.36), which clusters built by older kubeadm patch releases still run.
- 1.34: CoreDNS "v1.12.1", pause "3.10.1".
- 1.35: CoreDNS "v1.13.1", pause "3.10.1" (both as a stored copy of the 1.35 constants reads them).
- 1.36: pause "3.10.2" (kubeclipper/kubeclipper#947: "k8s 1.36 uses pause:3.10.2"), CoreDNS "v1.14.2" (a
  test fixture of the 1.36 constants in a stored scraper; the release-1.36 file itself is not in
  the stored corpora: taken as the best evidence there is).
- 1.37: etcd "3.7.0-0" (kubernetes/kubernetes#141032: 1.37 "already bumped etcd v3.7.0" before
  its code freeze; 3.7.1 went to the next minor). pause "3.10.2" and CoreDNS "v1.14.2": NOT
  confirmed for 1.37 by any stored source (no copy of release-1.37's constants.go); carried from
  1.36, both images that exist. Check `kubeadm config images list --kubernetes-version v1.37.1`
  before relying on them, and correct them here.

The etcd a stack actually runs may be newer than kubeadm's pin: `components.k8s.version_policy`
says which (etcd's upgrade guides ask for newer patches than kubeadm pins, and the stack writes its
own tag into the ClusterConfiguration).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class KubeadmPins:
    etcd: str
    """registry.k8s.io/etcd tag, e.g. "3.6.5-0"."""
    pause: str
    """registry.k8s.io/pause tag, e.g. "3.10.1"."""
    coredns: str
    """registry.k8s.io/coredns/coredns tag, e.g. "v1.12.1"."""


KUBEADM_PINS: Mapping[int, KubeadmPins] = {
    32: KubeadmPins(etcd="3.5.24-0", pause="3.10", coredns="v1.11.3"),
    33: KubeadmPins(etcd="3.5.24-0", pause="3.10", coredns="v1.12.0"),
    34: KubeadmPins(etcd="3.6.10-0", pause="3.10.1", coredns="v1.12.1"),
    35: KubeadmPins(etcd="3.6.10-0", pause="3.10.1", coredns="v1.13.1"),
    36: KubeadmPins(etcd="3.6.10-0", pause="3.10.2", coredns="v1.14.2"),
    37: KubeadmPins(etcd="3.7.0-0", pause="3.10.2", coredns="v1.14.2"),
}
"""Per Kubernetes minor (1.32 -> 32), kubeadm's pins (module docstring)."""


def kubeadm_pins(minor: int) -> KubeadmPins:
    """kubeadm's etcd, pause and CoreDNS tags for Kubernetes 1.`minor`; ValueError outside the table."""
    try:
        return KUBEADM_PINS[minor]
    except KeyError:
        known = sorted(KUBEADM_PINS)
        raise ValueError(
            f"no kubeadm image pins known for Kubernetes 1.{minor} (known: 1.{known[0]}-1.{known[-1]})"
        ) from None
