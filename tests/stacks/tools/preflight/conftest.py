"""The vCenter simulator for the preflight tests, plus the inventory they plant in it.

Same binary and start-up protocol as tests/components/vsphere/conftest.py (build/vcsim-harness, built by
scripts/build-vcsim.sh; it prints `VCSIM_URL=...` and exits when stdin closes), but an instance of
our own: preflight plants templates, snapshots and VMs, and another suite's simulator should not
see them. Under `--import-mode=importlib` the other conftest's fixtures are not visible here.

Without Go or the harness the tests skip, except under CI=true, where they fail.
Everything here talks to 127.0.0.1 only.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from stacks.tools.simulator.plant import harden_management_rulesets
from tests.real_parts import unavailable

ROOT = Path(__file__).resolve().parents[4]
HARNESS = ROOT / "build" / "vcsim-harness"
BUILD_SCRIPT = ROOT / "scripts" / "build-vcsim.sh"
START_TIMEOUT_S = 60.0

SOURCE_VM = "DC0_C0_RP0_VM0"
TEMPLATE = "pf-template"
"""A template with exactly one snapshot, `base`."""
BARE_TEMPLATE = "pf-template-bare"
"""A template without a snapshot."""
GPU_TEMPLATE = "pf-gpu-template"
"""The GPU workers' template: a grid_t4-16c vGPU, BIOS (fine on a T4), one snapshot, `base`."""
GPU_TEMPLATE_8C = "pf-gpu-template-8c"
"""As GPU_TEMPLATE, with GPU_USER_PROFILE (grid_t4-8c)."""
A100_BIOS_TEMPLATE = "pf-gpu-template-a100-bios"
"""A grid_a100-40c template as a T4 one would be made: BIOS, no 64-bit MMIO, no snapshot."""
A100_TEMPLATE = "pf-gpu-template-a100"
"""A grid_a100-40c template done right: EFI, `pciPassthru.use64bitMMIO`, 128 GB of MMIO, no snapshot."""
OLD_TOOLKIT_TEMPLATE = "pf-gpu-template-old-toolkit"
"""As GPU_TEMPLATE, but its build recorded NVIDIA Container Toolkit 1.17.7 (before the CVE-2025-23266 fix)."""
TOOLKIT_RECORDED = {
    GPU_TEMPLATE: "1.18.0",
    GPU_TEMPLATE_8C: "1.18.0",
    OLD_TOOLKIT_TEMPLATE: "1.17.7",
}
"""The toolkit version each T4 template's build recorded in its extraConfig (templates/packer/gpu)."""
A100_MMIO = {"pciPassthru.use64bitMMIO": "TRUE", "pciPassthru.64bitMMIOSizeGB": "128"}
TAKEN_VM = "taken-worker-1"
"""A VM whose name a stack with namePrefix `taken` would create again."""
HOG_VM = "pf-hog"
"""A powered-on VM reserving 3072 MB on HOG_HOST, a cluster host the base stack does not use."""
HOG_HOST = "DC0_C0_H3"
HOG_RESERVATION_MB = 3072
GPU_USER_VM = "pf-gpu-user"
"""A powered-on VM not of any stack here, holding a grid_t4-8c vGPU on GPU_USER_HOST's one T4."""
GPU_USER_HOST = "DC0_C0_H2"
GPU_USER_PROFILE = "grid_t4-8c"
NEWER_HOST = "DC0_C0_H1"
NEWER_HOST_VERSION = "7.0.2"
"""ESXi 7.0 U2: the oldest release that runs hardware version 19 (KB 2007240)."""
NO_ROCE = ("DC0_C0_H2", "vmnic5")
"""An RDMA vmnic whose RDMA device is iWARP-only."""
UNPAIRED = ("DC0_C0_H3", "vmnic5")
"""An RDMA vmnic without an RDMA device."""
HARNESS_FLAGS = [
    # vCenter 7.0 U3: the API that reports HostNetworkInfo.rdmaDevice (vcsim/preflight.go).
    "-api-version",
    "7.0.3.0",
    "-rdma-no-roce",
    ":".join(NO_ROCE),
    "-rdma-unpaired",
    ":".join(UNPAIRED),
    "-esxi-version",
    f"{NEWER_HOST}={NEWER_HOST_VERSION}",
    # The GPU user's vGPU powers on only where the host runs Shared Direct, as on ESXi.
    "-graphics-default",
    "sharedDirect",
]


def _unavailable(message: str) -> NoReturn:
    unavailable("vCenter simulator", message)


@dataclass(frozen=True)
class Simulator:
    url: str

    @property
    def parts(self) -> urllib.parse.SplitResult:
        return urllib.parse.urlsplit(self.url)

    @property
    def server(self) -> str:
        return f"http://127.0.0.1:{self.parts.port}"

    @property
    def user(self) -> str:
        return urllib.parse.unquote(self.parts.username or "")

    @property
    def password(self) -> str:
        return urllib.parse.unquote(self.parts.password or "")


def _ensure_harness() -> None:
    stale = HARNESS.exists() and any(p.stat().st_mtime > HARNESS.stat().st_mtime for p in (ROOT / "vcsim").glob("*.go"))
    if HARNESS.exists() and not stale:
        return
    if shutil.which("go") is None:
        if HARNESS.exists():
            return  # stale but usable
        _unavailable(
            "no build/vcsim-harness and no Go toolchain (apt-get install golang-go golang-github-vmware-govmomi-dev)"
        )
    result = subprocess.run(["bash", str(BUILD_SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    if result.returncode != 0 or not HARNESS.exists():
        _unavailable(f"scripts/build-vcsim.sh failed: {result.stderr.strip()[-2000:]}")


def _read_url(process: subprocess.Popen[bytes]) -> str | None:
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    buffer = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout.fileno()], [], [], 0.5)
        if not ready:
            if process.poll() is not None:
                return None
            continue
        chunk = os.read(process.stdout.fileno(), 4096)
        if not chunk:
            return None
        buffer += chunk
        for line in buffer.decode(errors="replace").splitlines():
            if line.startswith("VCSIM_URL="):
                return line[len("VCSIM_URL=") :].strip()
    return None


@pytest.fixture(scope="session")
def simulator() -> Iterator[Simulator]:
    _ensure_harness()
    process = subprocess.Popen(
        [str(HARNESS), "-port", "0", "-exit-on-stdin-eof", *HARNESS_FLAGS],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = _read_url(process)
        if url is None:
            _unavailable("build/vcsim-harness did not print its URL")
        assert url is not None
        sim = Simulator(url)
        assert sim.parts.hostname == "127.0.0.1", sim.url
        yield sim
    finally:
        from components.vcenter.session import disconnect_all

        disconnect_all()
        if process.stdin is not None:
            process.stdin.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _find(si: Any, vimtype: Any, name: str) -> Any:
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vimtype], True)
    try:
        return next(obj for obj in view.view if obj.name == name)
    finally:
        view.Destroy()


MANAGEMENT_ALLOWED = "10.10.0.5"
"""The one address every simulator host's vSphereClient ruleset accepts once planted (vCenter's,
as an administrator would set it); CIMSLP is off. Tests that open a host put this back."""


def restrict_management_rulesets(si: Any, host_name: str | None = None) -> None:
    """Each host's (or `host_name`'s) management rulesets limited to MANAGEMENT_ALLOWED, CIMSLP off."""
    harden_management_rulesets(si, MANAGEMENT_ALLOWED, host_name)


@dataclass(frozen=True)
class Planted:
    sim: Simulator
    hog_host: str
    """The host the reserving VM runs on (HOG_HOST)."""


@pytest.fixture(scope="session")
def planted(simulator: Simulator) -> Iterator[Planted]:
    """Templates (with and without a snapshot), a VM with a taken name, a VM reserving memory."""
    from components.vcenter.tasks import wait_for_task

    si = SmartConnect(
        protocol="http", host="127.0.0.1", port=simulator.parts.port, user=simulator.user, pwd=simulator.password
    )
    try:
        source = _find(si, vim.VirtualMachine, SOURCE_VM)

        def clone(name: str, power_on: bool = False) -> Any:
            spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=power_on)
            wait_for_task(source.CloneVM_Task(folder=source.parent, name=name, spec=spec))
            return _find(si, vim.VirtualMachine, name)

        template = clone(TEMPLATE)
        wait_for_task(template.ReconfigVM_Task(spec=vim.vm.ConfigSpec(firmware="efi")))  # the bare one stays BIOS
        wait_for_task(template.CreateSnapshot_Task(name="base", description="", memory=False, quiesce=False))
        template.MarkAsTemplate()
        clone(BARE_TEMPLATE).MarkAsTemplate()

        def gpu_template(name: str, profile: str, **config: Any) -> Any:
            vm = clone(name)
            if vm.runtime.powerState == "poweredOn":
                wait_for_task(vm.PowerOffVM_Task())
            vgpu = vim.vm.device.VirtualDeviceSpec(
                operation=vim.vm.device.VirtualDeviceSpec.Operation.add,
                device=vim.vm.device.VirtualPCIPassthrough(
                    key=-1, backing=vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=profile)
                ),
            )
            spec = vim.vm.ConfigSpec(deviceChange=[vgpu], memoryReservationLockedToMax=True, **config)
            wait_for_task(vm.ReconfigVM_Task(spec=spec))
            return vm

        for name, profile in (
            (GPU_TEMPLATE, "grid_t4-16c"),
            (GPU_TEMPLATE_8C, GPU_USER_PROFILE),
            (OLD_TOOLKIT_TEMPLATE, "grid_t4-16c"),
        ):
            # The key the Packer build writes (templates/packer/gpu/rocky9-vgpu.pkr.hcl).
            recorded = [
                vim.option.OptionValue(key="gpucluster.nvidiaContainerToolkitVersion", value=TOOLKIT_RECORDED[name])
            ]
            gpu = gpu_template(name, profile, extraConfig=recorded)
            wait_for_task(gpu.CreateSnapshot_Task(name="base", description="", memory=False, quiesce=False))
            gpu.MarkAsTemplate()
        gpu_template(A100_BIOS_TEMPLATE, "grid_a100-40c").MarkAsTemplate()
        mmio = [vim.option.OptionValue(key=k, value=v) for k, v in A100_MMIO.items()]
        gpu_template(A100_TEMPLATE, "grid_a100-40c", firmware="efi", extraConfig=mmio).MarkAsTemplate()
        clone(TAKEN_VM)
        hog = clone(HOG_VM)
        # The simulator ignores a clone's host placement, but honours a relocation.
        wait_for_task(hog.RelocateVM_Task(spec=vim.vm.RelocateSpec(host=_find(si, vim.HostSystem, HOG_HOST))))
        wait_for_task(
            hog.ReconfigVM_Task(
                spec=vim.vm.ConfigSpec(memoryAllocation=vim.ResourceAllocationInfo(reservation=HOG_RESERVATION_MB))
            )
        )
        if hog.runtime.powerState != "poweredOn":
            wait_for_task(hog.PowerOnVM_Task())
        gpu_user = clone(GPU_USER_VM)
        if gpu_user.runtime.powerState == "poweredOn":
            wait_for_task(gpu_user.PowerOffVM_Task())
        wait_for_task(gpu_user.RelocateVM_Task(spec=vim.vm.RelocateSpec(host=_find(si, vim.HostSystem, GPU_USER_HOST))))
        vgpu = vim.vm.device.VirtualDeviceSpec(
            operation=vim.vm.device.VirtualDeviceSpec.Operation.add,
            device=vim.vm.device.VirtualPCIPassthrough(
                key=-1, backing=vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=GPU_USER_PROFILE)
            ),
        )
        # A vGPU VM powers on only with all its memory reserved (the harness refuses it otherwise).
        spec = vim.vm.ConfigSpec(deviceChange=[vgpu], memoryReservationLockedToMax=True)
        wait_for_task(gpu_user.ReconfigVM_Task(spec=spec))
        wait_for_task(gpu_user.PowerOnVM_Task())
        restrict_management_rulesets(si)
        yield Planted(sim=simulator, hog_host=hog.runtime.host.name)
    finally:
        Disconnect(si)


@pytest.fixture
def credentials(planted: Planted, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VSPHERE_USER", planted.sim.user)
    monkeypatch.setenv("VSPHERE_PASSWORD", planted.sim.password)


@pytest.fixture
def preflight(
    planted: Planted, credentials: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, list[str]]]:
    """preflight(env_dict) -> (exit status, stdout lines), credentials from the environment."""
    from stacks.cli import main

    def run(env: dict[str, Any], server: str | None = None, *extra: str) -> tuple[int, list[str]]:
        path = tmp_path / "Pulumi.sim.yaml"
        path.write_text(yaml.safe_dump({"config": {"vsphere-gpu-cluster:environment": env}}, sort_keys=False))
        code = main(["preflight", "sim", "--file", str(path), "--server", server or planted.sim.server, *extra])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.out + captured.err
        return code, captured.out.splitlines()

    return run
