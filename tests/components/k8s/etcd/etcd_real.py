"""A real etcd cluster on loopback, TLS everywhere and client certificates required, as kubeadm runs it.

Each member is an `etcd` process on its own loopback address (127.X.Y.n: Linux routes 127.0.0.0/8
to lo), all on one client port (our code reaches every member on one `client_port`) and on peer
port 2380 (what kubeadm advertises and what `etcd_removal` looks a member up by). The flags are
kubeadm's (cmd/kubeadm/app/phases/etcd/local.go, `getEtcdCommand`): `--client-cert-auth`,
`--peer-client-cert-auth`, one CA for both, a server certificate naming the member's address. The
gRPC gateway is on by default when etcd is configured by flags (`--enable-grpc-gateway`, default
true in 3.4); `--strict-reconfig-check` too. Elections are shortened for the tests' sake only.

The packaged etcd is 3.4 (Debian 12); `etcdctl` only checks results, our own code does the work.
Without etcd the tests skip, except under CI=true, where they fail.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import random
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from components.k8s.etcd.gateway import EtcdGateway, GatewayResponse
from tests.components.k8s.etcd.etcd_pki import EtcdPki
from tests.real_parts import require_program

PEER_PORT = 2380
START_TIMEOUT_S = 60.0
HEALTH_INTERVAL_S = 5.0
"""etcd counts a peer towards its own quorum check (`mayRemoveMember`, `mayAddMember`) only once its
transport has been connected that long (etcd server/etcdserver/server.go `HealthInterval`, a
constant): before it, a removal is refused with 503 "unhealthy cluster"."""
ETCD = "/usr/bin/etcd"
ETCDCTL = "/usr/bin/etcdctl"


def require_etcd() -> tuple[str, str]:
    return (
        require_program("etcd", ETCD, "etcd-server"),
        require_program("etcdctl", ETCDCTL, "etcd-client"),
    )


def _bindable(address: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True


def _loopback_addresses(count: int) -> list[str]:
    """`count` loopback addresses in a random 127.X.Y.0/24 where the peer port is free on each:
    another run (another worktree, a CI job) picks another block."""
    for _ in range(50):
        base = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}."
        addresses = [f"{base}{n}" for n in range(1, count + 1)]
        if all(_bindable(a, PEER_PORT) for a in addresses):
            return addresses
    raise RuntimeError(f"no loopback block with port {PEER_PORT} free")


def _common_free_port(addresses: list[str]) -> int:
    for _ in range(20):
        with socket.socket() as probe:
            probe.bind((addresses[0], 0))
            port = int(probe.getsockname()[1])
        if all(_bindable(a, port) for a in addresses):
            return port
    raise RuntimeError("no common free port on the loopback addresses")


class RealEtcd:
    """Members by name (`cp-1`...); `start`, `stop`, `add_learner`; `members()` through etcdctl."""

    def __init__(self, pki: EtcdPki, folder: Path, names: list[str], spare: int = 1) -> None:
        """`names` start as the cluster; `spare` more (cp-4...) get addresses, to join as learners."""
        self.etcd, self.etcdctl = require_etcd()
        self.pki, self.folder = pki, folder
        every = [*names, *(f"cp-{len(names) + n}" for n in range(1, spare + 1))]
        self.addresses = dict(zip(every, _loopback_addresses(len(every)), strict=True))
        self.port = _common_free_port(list(self.addresses.values()))
        self.token = f"gpucluster-test-{os.getpid()}-{random.randrange(1 << 32):x}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.initial = {name: self.addresses[name] for name in names}
        self.ready_at = 0.0

    # --- addresses ------------------------------------------------------------------------------
    def endpoint(self, name: str) -> str:
        return f"https://{self.addresses[name]}:{self.port}"

    def peer(self, name: str) -> str:
        return f"https://{self.addresses[name]}:{PEER_PORT}"

    # --- processes ------------------------------------------------------------------------------
    def _command(self, name: str, cluster: dict[str, str], state: str) -> list[str]:
        cert, key = self.pki.server_cert(self.addresses[name])
        ca = str(self.pki.ca_file)
        return [
            self.etcd,
            f"--name={name}",
            f"--data-dir={self.folder / name}",
            f"--listen-client-urls={self.endpoint(name)}",
            f"--advertise-client-urls={self.endpoint(name)}",
            f"--listen-peer-urls={self.peer(name)}",
            f"--initial-advertise-peer-urls={self.peer(name)}",
            "--initial-cluster=" + ",".join(f"{n}=https://{a}:{PEER_PORT}" for n, a in cluster.items()),
            f"--initial-cluster-state={state}",
            f"--initial-cluster-token={self.token}",
            f"--cert-file={cert}",
            f"--key-file={key}",
            "--client-cert-auth=true",
            f"--trusted-ca-file={ca}",
            f"--peer-cert-file={cert}",
            f"--peer-key-file={key}",
            "--peer-client-cert-auth=true",
            f"--peer-trusted-ca-file={ca}",
            "--snapshot-count=10000",
            "--heartbeat-interval=50",
            "--election-timeout=500",
            "--logger=zap",
            "--log-outputs=stderr",
        ]

    def _spawn(self, name: str, cluster: dict[str, str], state: str) -> None:
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 - the process owns it
        self.processes[name] = subprocess.Popen(
            self._command(name, cluster, state), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()

    def start_cluster(self) -> None:
        for name in self.initial:
            self._spawn(name, self.initial, "new")
        self.wait_ready(list(self.initial))
        self.ready_at = time.monotonic()

    def settle(self) -> None:
        """Until the members have been connected for etcd's health window, as in any cluster that has
        run for a while (the guard meets such clusters: it runs after a drain)."""
        time.sleep(max(0.0, self.ready_at + HEALTH_INTERVAL_S + 0.5 - time.monotonic()))

    def start(self, name: str) -> None:
        """Restart a stopped member from its data directory (the initial-cluster flags are then ignored)."""
        self._spawn(name, self.initial, "existing")
        self.wait_ready([name])

    def stop(self, name: str, *, seen: bool = True) -> None:
        """Stop a member; with `seen`, until every running member's transport has noticed."""
        process = self.processes.pop(name, None)
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if seen:
            self._wait_inactive(name)

    def _wait_inactive(self, name: str) -> None:
        """etcd's own quorum check counts the peers its transport has seen active (rafthttp
        `ActiveSince`); its gauge `etcd_network_active_peers{Remote=<id>}` on /metrics says when a
        stopped peer dropped out of that count."""
        members = self.members()
        if name not in members:
            return
        remote = f'Remote="{members[name]:x}"'
        cert, key = self.pki.client_files
        context = ssl.create_default_context(cafile=str(self.pki.ca_file))
        context.load_cert_chain(str(cert), str(key))
        deadline = time.monotonic() + START_TIMEOUT_S
        for other in [n for n in list(self.processes) if self.running(n)]:
            while True:
                with urllib.request.urlopen(self.endpoint(other) + "/metrics", context=context, timeout=5) as page:
                    lines = page.read().decode().splitlines()
                active = [x for x in lines if x.startswith("etcd_network_active_peers{") and remote in x]
                if not active or active[0].endswith(" 0"):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"etcd {other} still counts {name} as an active peer")
                time.sleep(0.05)

    def close(self) -> None:
        """Kill every member (its data is thrown away: no graceful shutdown to wait for)."""
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
        for process in self.processes.values():
            process.wait()
        self.processes.clear()

    def running(self, name: str) -> bool:
        process = self.processes.get(name)
        return process is not None and process.poll() is None

    def log(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    # --- etcdctl --------------------------------------------------------------------------------
    def ctl(self, name: str, *args: str) -> Any:
        """`etcdctl -w json ...` against one member's endpoint, with the guard's client certificate."""
        cert, key = self.pki.client_files
        result = subprocess.run(
            [
                self.etcdctl,
                f"--endpoints={self.endpoint(name)}",
                f"--cacert={self.pki.ca_file}",
                f"--cert={cert}",
                f"--key={key}",
                "--command-timeout=5s",
                "-w",
                "json",
                *args,
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "ETCDCTL_API": "3"},
            timeout=30,
        )
        if result.returncode != 0:
            raise RuntimeError(f"etcdctl {' '.join(args)} at {name}: {result.stderr.strip()}")
        return json.loads(result.stdout)

    def members(self, via: str | None = None) -> dict[str, int]:
        """Member name -> ID, the name read from the peer URL's address (an unstarted member has none)."""
        via = via or next(n for n in self.processes if self.running(n))
        by_address = {address: name for name, address in self.addresses.items()}
        listed = self.ctl(via, "member", "list")["members"]
        return {by_address[m["peerURLs"][0].split("//")[1].rsplit(":", 1)[0]]: int(m["ID"]) for m in listed}

    def wait_ready(self, names: list[str]) -> None:
        """Until each member answers its status with a leader (or its process exits: fail, with its log)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        pending = list(names)
        while pending:
            name = pending[0]
            if not self.running(name):
                raise RuntimeError(f"etcd {name} exited:\n{self.log(name)}")
            try:
                (status,) = self.ctl(name, "endpoint", "status")
                ready = bool(status["Status"].get("leader"))
            except (RuntimeError, subprocess.TimeoutExpired, ValueError):
                ready = False
            if ready:
                pending.pop(0)
            elif time.monotonic() > deadline:
                raise RuntimeError(f"etcd {name} found no leader within {START_TIMEOUT_S:g}s:\n{self.log(name)}")
            else:
                time.sleep(0.2)

    def wait_leaderless(self, name: str) -> None:
        """Until the member's status names no leader (after quorum loss and one election timeout)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.ctl(name, "endpoint", "status")[0]["Status"].get("leader"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd {name} kept its leader")
            time.sleep(0.1)

    def add_learner(self, name: str, *, start: bool) -> int:
        """`etcdctl member add --learner` (what kubeadm's learner mode does), then start it or not."""
        via = next(n for n in self.processes if self.running(n))
        added = self.ctl(via, "member", "add", name, "--learner", f"--peer-urls={self.peer(name)}")
        if start:
            peers = {m["peerURLs"][0] for m in added["members"]}
            self._spawn(name, {n: a for n, a in self.addresses.items() if self.peer(n) in peers}, "existing")
            # A learner's status has a leader as soon as it has caught up.
            self.wait_ready([name])
        return int(added["member"]["ID"])


@contextlib.contextmanager
def real_etcd(pki: EtcdPki, folder: Path, names: list[str], *, settled: bool = True) -> Iterator[RealEtcd]:
    """A started cluster, settled unless told (see `RealEtcd.settle`)."""
    cluster = RealEtcd(pki, folder, names)
    try:
        cluster.start_cluster()
        if settled:
            cluster.settle()
        yield cluster
    finally:
        cluster.close()


class ClusterPool:
    """Clusters started `depth` ahead, so that each test takes one already through etcd's health
    window instead of sleeping 5 s of its own (test_etcd_member.py: 100 s -> 45 s)."""

    def __init__(self, pki: EtcdPki, folders: Callable[[], Path], names: list[str], depth: int = 3) -> None:
        self.pki, self.folders, self.names, self.depth = pki, folders, names, depth
        self._ahead: collections.deque[RealEtcd] = collections.deque()

    def _start(self) -> RealEtcd:
        cluster = RealEtcd(self.pki, self.folders(), self.names)
        try:
            cluster.start_cluster()
        except BaseException:
            cluster.close()
            raise
        return cluster

    def take(self) -> RealEtcd:
        """A settled cluster, the caller's to close."""
        while len(self._ahead) < self.depth:
            self._ahead.append(self._start())
        cluster = self._ahead.popleft()
        self._ahead.append(self._start())  # ages while this test runs
        cluster.settle()
        return cluster

    def close(self) -> None:
        while self._ahead:
            self._ahead.popleft().close()


class RecordingGateway(EtcdGateway):
    """Our own gateway, unchanged, that notes each call: (endpoint, path, body), in `calls`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def post(self, endpoint: str, path: str, body: dict[str, Any]) -> GatewayResponse:
        self.calls.append((endpoint, path, body))
        return super().post(endpoint, path, body)
