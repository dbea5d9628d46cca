"""The images kubeadm itself pins per Kubernetes minor: etcd, the pod sandbox (pause) and CoreDNS.

kubeadm pulls `<imageRepository>/etcd:<SupportedEtcdVersion[minor]>`, `<imageRepository>/pause:
<PauseVersion>` and CoreDNS at `CoreDNSVersion` (cmd/kubeadm/app/constants/constants.go and
cmd/kubeadm/app/images/images.go GetControlPlaneImages), spelled as the constants spell them. Each
value is the one on the release branch of that minor: etcd from `SupportedEtcdVersion` (release-1.32
and release-1.34 map 31-33 to "3.5.24-0", release-1.34 maps 34 to "3.6.5-0", release-1.35 maps 35 to
"3.6.6-0"), `PauseVersion` ("3.10" on release-1.32 and 1.33, "3.10.1" from release-1.34) and
`CoreDNSVersion` (components/k8s/upgrade/versions.py cites each branch). The stack's containerd
runs the same pause as its sandbox, so one image serves both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KubeadmPins:
    etcd: str
    """etcd's image tag, e.g. "3.6.5-0"."""
    pause: str
    """The pause image's tag, e.g. "3.10.1"."""
    coredns: str
    """CoreDNS's image tag, e.g. "v1.12.1"."""


_PINS: dict[int, KubeadmPins] = {
    32: KubeadmPins(etcd="3.5.24-0", pause="3.10", coredns="v1.11.3"),
    33: KubeadmPins(etcd="3.5.24-0", pause="3.10", coredns="v1.12.0"),
    34: KubeadmPins(etcd="3.6.5-0", pause="3.10.1", coredns="v1.12.1"),
    35: KubeadmPins(etcd="3.6.6-0", pause="3.10.1", coredns="v1.13.1"),
}


def kubeadm_pins(minor: int) -> KubeadmPins:
    """kubeadm's pins for Kubernetes 1.`minor`; KeyError naming the known minors for any other."""
    try:
        return _PINS[minor]
    except KeyError:
        raise KeyError(f"no kubeadm pins recorded for Kubernetes 1.{minor} (known: {sorted(_PINS)})") from None
