"""A node in a temporary root: the rendered user-data written as cloud-init would, the bootstrap
run as its systemd unit would, with recording stand-ins (standins/standin.sh) for every command
that would touch the machine.

Only a whitelist of harmless tools (cp, sed, grep, ...) is on PATH beside the stand-ins, so a
command the script runs without a stand-in fails the test instead of touching this machine.
"""

from __future__ import annotations

import configparser
import hashlib
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.k8s.node_bootstrap.paths import BOOTSTRAP_ENV_PATH, BOOTSTRAP_SCRIPT_PATH, BOOTSTRAP_UNIT_PATH
from components.k8s.node_bootstrap.pki_handoff import pki_bundle
from components.k8s.node_bootstrap.spec import ClusterPki, ClusterSpec
from tests.components.k8s.node_bootstrap.cluster_settings import HANDOFF_SIGNING_KEY_PEM

REPOSITORY_ROOT = Path(__file__).resolve().parents[4]

STANDIN = Path(__file__).parent / "standins" / "standin.sh"
STANDIN_NAMES = (
    "kubeadm",
    "kubectl",
    "systemctl",
    "modprobe",
    "rdma",
    "sysctl",
    "swapoff",
    "curl",
    "sleep",
    "containerd",
    "nvidia-smi",
    "nvidia-ctk",
    "dnf",
    "yum",
    "apt-get",
    "rpm",
    "update-ca-trust",
    "vmware-rpctool",
)
TOOLS = ("bash", "cat", "chmod", "cmp", "cp", "grep", "gzip", "mkdir", "mv", "od", "openssl", "rm", "sed", "sha256sum")
TOOLS += ("tar", "touch", "tr")

TOOLKIT_DEFAULT_CONFIG = """#accept-nvidia-visible-devices-as-volume-mounts = false
#accept-nvidia-visible-devices-envvar-when-unprivileged = true
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"

[nvidia-container-cli]
environment = []
ldconfig = "@/sbin/ldconfig"
load-kmods = true

[nvidia-container-runtime]
log-level = "info"
mode = "auto"
runtimes = ["runc", "crun"]

[nvidia-container-runtime-hook]
path = "nvidia-container-runtime-hook"
"""

CONTAINERD_CONFIG = {
    # The lines of `containerd config default` the script reads and edits: 1.x (version 2) and
    # 2.x (version 3) defaults, the sandbox image and config_path as each writes them.
    2: (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.8"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n'
        '[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = ""\n'
    ),
    3: (
        "version = 3\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = 'registry.k8s.io/pause:3.10'\n"
        "[plugins.'io.containerd.cri.v1.images'.registry]\n  config_path = '/etc/containerd/certs.d:/etc/docker/certs.d'\n"
        "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n  SystemdCgroup = true\n"
    ),
}


@dataclass
class Run:
    returncode: int
    output: str

    @property
    def power_cut(self) -> bool:
        return self.returncode == -signal.SIGKILL


CALICO_MANIFEST = b"""\
# A stand-in for Calico's tigera-operator.yaml, with its shape where the bootstrap touches it (the
# operator's image, named as upstream names it): the repository holds no copy of Calico's file.
apiVersion: v1
kind: Namespace
metadata:
  name: tigera-operator
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: tigera-operator
  namespace: tigera-operator
spec:
  template:
    spec:
      containers:
        - name: tigera-operator
          image: quay.io/tigera/operator:v1.40.3
"""
"""What the stand-in curl serves for tigera-operator.yaml."""
CALICO_MANIFEST_SHA256 = hashlib.sha256(CALICO_MANIFEST).hexdigest()
"""The checksum the harness pins in the init node's settings in place of the recorded one."""
_PINNED_CALICO = re.compile(r"^GPUCLUSTER_CALICO_MANIFEST_SHA256=[0-9a-f]{64}$", re.MULTILINE)


@dataclass
class Node:
    """One VM: its root file system, the simulated world around it, and how its unit runs the script."""

    base: Path
    user_data: str
    hostname: str
    without: tuple[str, ...] = ()
    """Stand-ins left out (a template without nvidia-smi, ...)."""
    root: Path = field(init=False)
    sim: Path = field(init=False)
    runs: list[Run] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root = self.base / "root"
        self.sim = self.base / "sim"
        self.sim.mkdir(parents=True)
        (self.sim / "hostname").write_text(self.hostname + "\n")
        (self.sim / "calico-manifest").write_bytes(CALICO_MANIFEST)
        bin_dir = self.base / "bin"
        bin_dir.mkdir()
        for name in STANDIN_NAMES:
            if name not in self.without:
                (bin_dir / name).symlink_to(STANDIN)
        for tool in TOOLS:
            found = shutil.which(tool)
            assert found, f"{tool} is needed to run the bootstrap script"
            (bin_dir / tool).symlink_to(found)
        if "python3" not in self.without:
            # The node's python3 (cloud-init's own) is this interpreter, which has `cryptography`
            # as a template with python3-cryptography does; a wrapper, not a link, so that it
            # stays the virtualenv's interpreter wherever the link would sit.
            (bin_dir / "python3").write_text(f'#!/bin/bash\nexec {sys.executable} "$@"\n')
            (bin_dir / "python3").chmod(0o755)
        self.path = str(bin_dir)
        self.cloud_init_writes_files()
        (self.root / "etc" / "fstab").write_text("/dev/sda1 / xfs defaults 0 0\n/dev/sda2 none swap sw 0 0\n")

    def cloud_init_writes_files(self) -> None:
        """What cloud-init's write_files does with the document (once per instance)."""
        document = yaml.safe_load(self.user_data)
        for entry in document["write_files"]:
            path = self.root / entry["path"].lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            content = entry["content"]
            if entry["path"] == BOOTSTRAP_ENV_PATH:
                # The stand-in manifest's own checksum in place of the recorded one (the real one
                # is checked by the golden user-data): the script checks what it fetched against it.
                content, pins = _PINNED_CALICO.subn(
                    f"GPUCLUSTER_CALICO_MANIFEST_SHA256={CALICO_MANIFEST_SHA256}", content
                )
                assert pins == ("GPUCLUSTER_ROLE=init" in content), "the init node's settings carry one Calico pin"
            path.write_text(content)
            path.chmod(int(entry["permissions"], 8))

    # --- the world around the node -------------------------------------------------------------
    def stack_delivers_pki(
        self, spec: ClusterSpec, pki: ClusterPki, signing_key: str = HANDOFF_SIGNING_KEY_PEM
    ) -> None:
        """The stack's `InitPkiDelivery` for this (init) node: it answers the node's key request
        in guestinfo with `pki` sealed to the node's certificate and signed with `signing_key`
        (standins: vmware-rpctool)."""
        (self.sim / "pki-bundle").write_bytes(pki_bundle(spec, pki))
        (self.sim / "pki-signing-key").write_text(signing_key)

    def guestinfo(self, key: str) -> str | None:
        """A guestinfo value of this VM as vCenter sees it, or None."""
        path = self.sim / "guestinfo" / key
        return path.read_text() if path.exists() else None

    def set(self, name: str, value: Any = "") -> None:
        (self.sim / name).write_text(f"{value}\n")

    def has(self, name: str) -> bool:
        return (self.sim / name).exists()

    def lines(self, name: str) -> list[str]:
        path = self.sim / name
        return path.read_text().splitlines() if path.exists() else []

    def with_gpu(self) -> None:
        vendor = self.root / "sys/bus/pci/devices/0000:0b:00.0/vendor"
        vendor.parent.mkdir(parents=True)
        vendor.write_text("0x10de\n")
        # The toolkit package's config.toml as installed (`nvidia-ctk config default` of 1.17: the
        # two device-list keys commented out at their defaults, then the tables).
        toolkit = self.root / "etc/nvidia-container-runtime/config.toml"
        toolkit.parent.mkdir(parents=True, exist_ok=True)
        toolkit.write_text(TOOLKIT_DEFAULT_CONFIG)

    def with_pvrdma(self, name: str) -> None:
        """A PVRDMA NIC that udev named `name` before cloud-init ran: `vmw_pvrdma0` where the
        template's rdma-core keeps kernel names (RHEL), `rocep11s0` where it keeps upstream's
        NAME_FALLBACK (Debian, Ubuntu). Its sysfs entry links to the driver, as the kernel's does."""
        self.set("pvrdma-present")
        driver = self.root / "sys/bus/pci/drivers/vmw_pvrdma"
        driver.mkdir(parents=True, exist_ok=True)
        device = self.root / "sys/class/infiniband" / name / "device"
        device.mkdir(parents=True)
        (device / "driver").symlink_to(driver)

    def with_containerd(self, version: int = 2) -> None:
        config = self.root / "etc/containerd/config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(CONTAINERD_CONFIG[version])

    @property
    def calls(self) -> list[str]:
        return self.lines("calls")

    def calls_of(self, prefix: str) -> list[str]:
        return [call for call in self.calls if call.startswith(prefix)]

    def file(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    # --- systemd ---------------------------------------------------------------------------------
    def unit(self) -> configparser.ConfigParser:
        unit = configparser.ConfigParser(strict=False, interpolation=None)
        unit.optionxform = str  # type: ignore[assignment,method-assign]
        unit.read_string(self.file(BOOTSTRAP_UNIT_PATH).read_text())
        return unit

    def unit_environment(self) -> dict[str, str]:
        """The unit's EnvironmentFile=, read as systemd reads it (KEY=VALUE, # comments)."""
        service = self.unit()["Service"]
        assert service["EnvironmentFile"] == BOOTSTRAP_ENV_PATH
        env: dict[str, str] = {}
        for line in self.file(service["EnvironmentFile"]).read_text().splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.partition("=")
                env[key] = value
        return env

    def start(self, *, timeout: float = 60) -> Run:
        """One start of the unit: ExecStart with the EnvironmentFile, as systemd runs it."""
        service = self.unit()["Service"]
        assert service["ExecStart"] == BOOTSTRAP_SCRIPT_PATH
        env = {
            **self.unit_environment(),
            "GPUCLUSTER_ROOT": str(self.root),
            "SIM": str(self.sim),
            "PATH": self.path,
            "HOSTNAME": self.hostname,
            "LC_ALL": "C",
            # The stand-in vmware-rpctool answers a key request with the program's own sealing
            # code (pki_responder.py), as the stack's InitPkiDelivery would.
            "GPUCLUSTER_TEST_PYTHON": sys.executable,
            "PYTHONPATH": str(REPOSITORY_ROOT),
        }
        result = subprocess.run(
            [str(self.file(service["ExecStart"]))],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,  # a power cut kills this process group, nothing else
        )
        run = Run(result.returncode, result.stdout + result.stderr)
        self.runs.append(run)
        return run

    def boot(self, *, max_starts: int = 10) -> Run:
        """A boot: the unit is started, and started again after a failure (Restart=on-failure,
        no start limit) until the script succeeds or the power is cut."""
        for _ in range(max_starts):
            run = self.start()
            if run.returncode == 0 or run.power_cut:
                return run
        raise AssertionError(f"the bootstrap did not succeed in {max_starts} starts:\n{run.output}")

    def cut_power_at(self, call_number: int, mode: str) -> None:
        self.set("cut-at", call_number)
        self.set("cut-mode", mode)
        (self.sim / "count").unlink(missing_ok=True)

    def restore_power(self) -> None:
        for name in ("cut-at", "cut-mode", "count"):
            (self.sim / name).unlink(missing_ok=True)

    @property
    def done(self) -> bool:
        return self.file("/var/lib/gpucluster/bootstrap.done").exists()


def use_real_containerd(node: Node, containerd: str) -> None:
    """The real containerd on the node's PATH for everything but `--version`. Debian 12's 1.6.20 is
    below every Kubernetes minor's floor (containerd RELEASES.md), so the bootstrap's version check
    would stop the run before the steps these tests give the real binary (its config dump); the
    version is answered as the template's 2.3 package prints it (the stand-in's answer).
    test_bootstrap_real_containerd runs the check on the real binary's own line."""
    wrapper = Path(node.path) / "containerd"
    wrapper.unlink(missing_ok=True)
    wrapper.write_text(
        "#!/bin/bash\n"
        'if [ "$*" = --version ]; then echo "containerd containerd.io 2.3.1 0123456789abcdef"; exit 0; fi\n'
        f'exec {containerd} "$@"\n'
    )
    wrapper.chmod(0o755)
