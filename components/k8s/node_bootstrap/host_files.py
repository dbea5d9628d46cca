"""The files of this package that go onto the nodes as they are: the bootstrap script, its
systemd unit and the host settings. Real files (in `files/`), loaded with `importlib.resources`,
so the text maintainers edit, shellcheck and the tests execute is the text a node runs."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

BOOTSTRAP_SCRIPT = "gpucluster-bootstrap.sh"
BOOTSTRAP_UNIT = "gpucluster-bootstrap.service"
BOOTSTRAP_WANTS_DROP_IN = "gpucluster-bootstrap-wants.conf"
MODULES_LOAD_KUBERNETES = "modules-load-kubernetes.conf"
MODULES_LOAD_RDMA = "modules-load-rdma.conf"
RDMA_NAMING_RULES = "rdma-persistent-naming.rules"
SYSCTL_KUBERNETES = "sysctl-kubernetes.conf"
NETWORKMANAGER_CALICO = "networkmanager-calico.conf"
ADMISSION_CONFIGURATION = "admission-configuration.yaml"
AUDIT_POLICY = "audit-policy.yaml"
FIREWALL_UNIT = "gpucluster-firewall.service"
KUBELET_WANTS_FIREWALL = "kubelet-wants-firewall.conf"
FIREWALL_SYNC_SCRIPT = "gpucluster-firewall-sync.sh"
FIREWALL_SYNC_UNIT = "gpucluster-firewall-sync.service"
FIREWALL_SYNC_TIMER = "gpucluster-firewall-sync.timer"
KUBELET_WANTS_FIREWALL_SYNC = "kubelet-wants-firewall-sync.conf"


@cache
def host_file(name: str) -> str:
    """The text of one file of `files/`."""
    return (files(__package__) / "files" / name).read_text(encoding="utf-8")
