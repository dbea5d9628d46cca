"""Fixtures for the vSphere layer: the govmomi vCenter simulator on a loopback port.

The simulator is our harness (vcsim/main.go, built by scripts/build-vcsim.sh), which adds what
govmomi 0.24's simulator lacks (host graphics manager, vGPU profiles, the pvrdma ruleset). When
it cannot be built, an upstream `vcsim` from PATH is used and the tests that need our additions
skip. With neither, the simulator tests skip, except under CI=true, where they fail.

Everything here talks to 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from components.resource_handlers import ConfigureRequest
from tests.components.vsphere.graphics_helpers import set_active_graphics
from tests.real_parts import unavailable

ROOT = Path(__file__).resolve().parents[3]
HARNESS = ROOT / "build" / "vcsim-harness"
BUILD_SCRIPT = ROOT / "scripts" / "build-vcsim.sh"
START_TIMEOUT_S = 60.0

# Simulator inventory (VPX model, see vcsim/main.go flags).
CLUSTER_HOSTS = ["DC0_C0_H0", "DC0_C0_H1", "DC0_C0_H2", "DC0_C0_H3"]
TEMPLATE_VM = "DC0_C0_RP0_VM0"


def _unavailable(message: str) -> NoReturn:
    unavailable("vCenter simulator", message)


@dataclass
class Vcsim:
    url: str
    """http://user:pass@127.0.0.1:PORT/sdk"""
    extended: bool
    """True for our harness (graphics manager, vGPU profiles, pvrdma ruleset)."""
    process: subprocess.Popen[bytes] = field(repr=False)

    @property
    def port(self) -> int:
        port = urllib.parse.urlsplit(self.url).port
        assert port is not None
        return port

    @property
    def user(self) -> str:
        return urllib.parse.unquote(urllib.parse.urlsplit(self.url).username or "")

    @property
    def password(self) -> str:
        return urllib.parse.unquote(urllib.parse.urlsplit(self.url).password or "")

    def config(self, port: int | None = None) -> dict[str, Any]:
        """The connection settings as the gpucluster plugin hands them to handlers' configure."""
        return {
            "vsphere:vsphereServer": f"http://127.0.0.1:{port or self.port}",
            "vsphere:user": self.user,
            "vsphere:password": self.password,
            "vsphere:allowUnverifiedSsl": "true",
        }


def _build_harness() -> str | None:
    """Build the harness; None on success, else why not."""
    if shutil.which("go") is None:
        return "no Go toolchain (apt-get install golang-go golang-github-vmware-govmomi-dev)"
    result = subprocess.run(["bash", str(BUILD_SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    if result.returncode != 0 or not HARNESS.exists():
        return f"scripts/build-vcsim.sh failed: {result.stderr.strip()[-2000:]}"
    return None


def _read_url(process: subprocess.Popen[bytes], prefixes: tuple[str, ...]) -> str | None:
    """Wait for the line carrying the URL on stdout."""
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    fd = process.stdout.fileno()
    buffer = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            if process.poll() is not None:
                return None
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buffer += chunk
        for line in buffer.decode(errors="replace").splitlines():
            for prefix in prefixes:
                if line.startswith(prefix):
                    return line[len(prefix) :].strip().strip("'\"")
    return None


def _start(command: list[str], prefixes: tuple[str, ...]) -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    url = _read_url(process, prefixes)
    if url is None:
        process.kill()
        process.wait()
        raise RuntimeError(f"{command[0]} did not print its URL")
    return process, url


@pytest.fixture(scope="session")
def vcsim() -> Iterator[Vcsim]:
    """The simulator, started once per test session on a free loopback port."""
    why = None
    script_newer = HARNESS.exists() and any(
        p.stat().st_mtime > HARNESS.stat().st_mtime for p in (ROOT / "vcsim").glob("*.go")
    )
    if not HARNESS.exists() or script_newer:
        why = _build_harness()
    if HARNESS.exists():
        process, url = _start([str(HARNESS), "-port", "0", "-exit-on-stdin-eof"], prefixes=("VCSIM_URL=",))
        sim = Vcsim(url=url, extended=True, process=process)
    elif shutil.which("vcsim"):
        # Upstream vcsim prints `export GOVC_URL=https://user:pass@127.0.0.1:PORT/sdk`; it
        # speaks TLS unless told otherwise (-tls=false on recent versions).
        process, url = _start(
            ["vcsim", "-l", "127.0.0.1:0", "-tls=false", "-host", "4", "-vm", "2"],
            prefixes=("export GOVC_URL=", "GOVC_URL="),
        )
        if not url.startswith("http"):
            url = "http://" + url
        sim = Vcsim(url=url, extended=False, process=process)
    else:
        _unavailable(why or "no harness and no vcsim on PATH")
        raise AssertionError("unreachable")
    try:
        yield sim
    finally:
        from components.vcenter.session import disconnect_all

        disconnect_all()
        if sim.process.stdin is not None:
            sim.process.stdin.close()
        sim.process.terminate()
        try:
            sim.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.process.kill()
            sim.process.wait()


@pytest.fixture
def extended(vcsim: Vcsim) -> Vcsim:
    """The simulator, only if it is our extended harness."""
    if not vcsim.extended:
        pytest.skip("needs the vcsim harness (graphics manager, vGPU profiles, pvrdma ruleset)")
    return vcsim


@pytest.fixture
def configure_request(vcsim: Vcsim) -> Callable[..., ConfigureRequest]:
    """Build the ConfigureRequest the engine would send, for the simulator or a proxy port."""

    def make(port: int | None = None) -> ConfigureRequest:
        return ConfigureRequest(vcsim.config(port))

    return make


@pytest.fixture
def configured(configure_request: Callable[..., ConfigureRequest]) -> Callable[..., Any]:
    """configured(provider, port=None) -> the provider, configured like the engine does."""

    def apply(provider: Any, port: int | None = None) -> Any:
        provider.configure(configure_request(port))
        return provider

    return apply


@pytest.fixture(scope="session")
def si(vcsim: Vcsim) -> Iterator[Any]:
    """A direct pyvmomi session, for arranging and inspecting state behind the providers."""
    service = SmartConnect(protocol="http", host="127.0.0.1", port=vcsim.port, user=vcsim.user, pwd=vcsim.password)
    yield service
    Disconnect(service)


def _find(si: Any, vimtype: Any, name: str) -> Any:
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vimtype], True)
    try:
        for obj in view.view:
            if obj.name == name:
                return obj
    finally:
        view.Destroy()
    raise LookupError(name)


@pytest.fixture
def find(si: Any) -> Callable[[Any, str], Any]:
    """find(vim.HostSystem, "DC0_C0_H0") -> the managed object."""
    return lambda vimtype, name: _find(si, vimtype, name)


def _reset_host(si: Any, name: str, extended: bool) -> None:
    host = _find(si, vim.HostSystem, name)
    host.configManager.advancedOption.UpdateOptions(
        changedValue=[vim.option.OptionValue(key="Net.PVRDMAVmknic", value="")]
    )
    if extended:
        host.configManager.firewallSystem.DisableRuleset(id="pvrdma")
        host.configManager.firewallSystem.UpdateRuleset(
            id="pvrdma", spec=vim.host.Ruleset.RulesetSpec(allowedHosts=vim.host.Ruleset.IpList(allIp=True))
        )
        set_active_graphics(host, "shared")
        _clear_custom_values(si, host)


def _clear_custom_values(si: Any, host: Any) -> None:
    manager = si.content.customFieldsManager
    for value in host.customValue or []:
        if value.value:
            manager.SetField(entity=host, key=value.key, value="")


@pytest.fixture
def host_name(si: Any, extended: Vcsim) -> Iterator[str]:
    """A cluster host in ESXi's defaults (option empty, ruleset off, graphics shared), reset after."""
    name = CLUSTER_HOSTS[0]
    _reset_host(si, name, extended.extended)
    yield name
    _reset_host(si, name, extended.extended)


@pytest.fixture
def fresh_vm(si: Any, find: Callable[[Any, str], Any], request: Any) -> Iterator[Any]:
    """A powered-on clone of a simulator VM, destroyed after the test."""
    from components.vcenter.tasks import wait_for_task

    template = find(vim.VirtualMachine, TEMPLATE_VM)
    name = f"test-{request.node.name[:40]}-{time.monotonic_ns() % 100000}"
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=True)
    wait_for_task(template.CloneVM_Task(folder=template.parent, name=name, spec=spec))
    vm = find(vim.VirtualMachine, name)
    # vGPU VMs power on only where the GPU runs in Shared Direct mode (vcsim/graphics_power.go).
    if vm.runtime.host.configManager.graphicsManager is not None:
        set_active_graphics(vm.runtime.host, "sharedDirect")
    if vm.runtime.powerState != "poweredOn":
        wait_for_task(vm.PowerOnVM_Task())
    yield vm
    with contextlib.suppress(Exception):  # the test may have destroyed it already
        if vm.runtime.powerState == "poweredOn":
            wait_for_task(vm.PowerOffVM_Task())
        wait_for_task(vm.Destroy_Task())


class TcpProxy:
    """A loopback TCP proxy to the simulator that a test can cut, to play a vCenter going away.

    `cut_on(b"EnableRuleset")` drops every connection (and refuses new ones) as soon as a
    request containing that text arrives, before it reaches the simulator; `restore()` (or
    `restore_after=`) brings the path back.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port: int = self.listener.getsockname()[1]
        self.down = False
        self.trigger: bytes | None = None
        self.restore_after: float | None = None
        self.cuts = 0
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_on(self, marker: bytes, *, restore_after: float | None = None) -> None:
        """Cut when a request contains `marker`; come back `restore_after` seconds later."""
        self.trigger = marker
        self.restore_after = restore_after

    def cut(self) -> None:
        with self._lock:
            self.down = True
            self.trigger = None
            self.cuts += 1
            for sock in list(self._sockets):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
            self._sockets.clear()
            if self.restore_after is not None:
                threading.Timer(self.restore_after, self.restore).start()
                self.restore_after = None

    def restore(self) -> None:
        self.down = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        with contextlib.suppress(OSError):
            self.listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        seen = b""
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                break
            if not data:
                break
            if from_client and self.trigger is not None:
                seen = (seen + data)[-65536:]
                if self.trigger in seen:
                    self.cut()
                    break
            try:
                sink.sendall(data)
            except OSError:
                break
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def tcp_proxy(vcsim: Vcsim) -> Iterator[TcpProxy]:
    proxy = TcpProxy(vcsim.port)
    yield proxy
    proxy.close()
