"""A cluster's network in network namespaces: nodes, pods and the machines around them.

Every node, pod and outside machine is a network namespace of its own, so each node holds exactly
the nftables ruleset it would hold and packets cross real veths, real routing and real netfilter.
One "hub" namespace carries two bridges, the management and the RDMA segment; each node has a leg
on each it is on (management address on `eth0`, RDMA address on `eth1`). Outside machines (an
admin host, the load balancer, an ESXi vmknic) sit on a segment with their own addresses and an
on-link default route, as a router would deliver them.

Pods are wired as Calico wires them (docs.tigera.io/calico/latest/reference/faq, "Why does my
container have a route to 169.254.1.1?"): a veth whose host end answers ARP by proxy, the pod's
/32 routed to it, the pod's default route via 169.254.1.1; each node routes the other nodes' pod
blocks via their management address (what Calico programs inside one subnet). Calico's
`natOutgoing` is played by one nftables rule with Felix's own condition and action (`nat_outgoing`,
below): a double of Calico's data plane, listed in docs/tests.md. Calico's own policy enforcement
is not played: the NetworkPolicies are judged by tests/flows/netpol.py.

Connections are real: listeners bind the ports in the destination's namespace, probes connect
from the source's (TCP connect, UDP echo), all at once with one deadline. Both run on threads of
the test process that enter the namespaces with setns(2), which is cheaper than a process each.
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import os
import selectors
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

T = TypeVar("T")

PROBE_TIMEOUT_S = 0.5
"""Every probe of one source runs at once; a dropped SYN waits out this deadline. On veths in one
kernel an accepted connection completes in well under a millisecond."""

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def enter(namespace: str) -> None:
    """Move the calling thread into `namespace` (setns(2)): sockets it creates from then on live
    there, and keep living there whichever thread uses them. Only ever called on a thread of our own."""
    fd = os.open(f"/var/run/netns/{namespace}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"setns into {namespace}: {os.strerror(error)}")
    finally:
        os.close(fd)


def _in_thread(work: Callable[[], T]) -> T:
    """`work` on a fresh thread (which it may move between namespaces), its result or error back."""
    box: list[Any] = []

    def target() -> None:
        try:
            box.append((True, work()))
        except BaseException as error:  # handed back to the caller
            box.append((False, error))

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    ok, value = box[0]
    if not ok:
        raise value
    return cast(T, value)


IPIP = 4
"""IP-in-IP's IP protocol number (Calico's IPIP encapsulation)."""
IPIP_PROBE, IPIP_ECHO = b"probe", b"echo"


def _raw_payload(packet: bytes) -> bytes:
    """A raw IPv4 socket reads the IP header too (raw(7)); its length is in the first byte."""
    return packet[(packet[0] & 0x0F) * 4 :]


class Listeners:
    """Listening sockets in many namespaces, served by one thread: TCP accepts, UDP echoes, and
    IP-in-IP (protocol 4) packets echoed from a raw socket."""

    def __init__(self, ports: Mapping[str, tuple[Iterable[int], Iterable[int]]], ipip: Iterable[str] = ()) -> None:
        self.selector = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.accepted: list[tuple[int, str]] = []
        """(local port, peer address) of every TCP connection accepted: the source as the
        destination saw it, after every NAT and tunnel on the way."""

        def open_all() -> None:
            for namespace in sorted(set(ipip)):
                enter(namespace)
                s = socket.socket(socket.AF_INET, socket.SOCK_RAW, IPIP)
                s.setblocking(False)
                self.selector.register(s, selectors.EVENT_READ, "ipip")
            for namespace, (tcp, udp) in ports.items():
                enter(namespace)
                for port in sorted(set(tcp)):
                    s = socket.socket()
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind(("0.0.0.0", port))
                    s.listen(1024)  # a sweep opens hundreds at once; a full backlog drops SYNs
                    s.setblocking(False)
                    self.selector.register(s, selectors.EVENT_READ, "tcp")
                for port in sorted(set(udp)):
                    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    s.bind(("0.0.0.0", port))
                    s.setblocking(False)
                    self.selector.register(s, selectors.EVENT_READ, "udp")

        _in_thread(open_all)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def wait_accepted(self, count: int, timeout_s: float = 2.0) -> list[tuple[int, str]]:
        """`accepted` once it holds `count` connections (or at `timeout_s`): a client's connect
        completes in the kernel before this thread gets to accept it."""
        until = time.monotonic() + timeout_s
        while len(self.accepted) < count and time.monotonic() < until:
            time.sleep(0.01)
        return list(self.accepted)

    def _serve(self) -> None:
        while not self.stop.is_set():
            for key, _ in self.selector.select(0.05):
                sock = cast(socket.socket, key.fileobj)
                try:
                    if key.data == "tcp":
                        connection, peer = sock.accept()
                        self.accepted.append((sock.getsockname()[1], peer[0]))
                        connection.close()
                    elif key.data == "ipip":
                        # Every protocol-4 packet to this namespace: echo probes, not echoes.
                        packet, peer = sock.recvfrom(256)
                        if _raw_payload(packet) == IPIP_PROBE:
                            sock.sendto(IPIP_ECHO, peer)
                    else:
                        data, peer = sock.recvfrom(64)
                        sock.sendto(data, peer)
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for key in list(self.selector.get_map().values()):
            cast(socket.socket, key.fileobj).close()
        self.selector.close()


_counter = itertools.count()


def run(*args: str, stdin: str | None = None) -> str:
    result = subprocess.run(list(args), input=stdin, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


@dataclass(frozen=True)
class Probe:
    """One connection to try: from `source` (an address of namespace `namespace`) to `target`."""

    namespace: str
    source: str
    """The address the probe binds; "0.0.0.0" leaves it to the route, as a program that does not
    bind (the API server, Open MPI's daemons) leaves it."""
    target: str
    port: int
    protocol: str = "tcp"
    """tcp, udp or ipip (an IP-in-IP packet, echoed: `port` is unused)."""
    source_port: int = 0
    """The probe's own port; 0: the kernel picks one."""


def nat_outgoing(pod_pool: str, *, keep_source_port: bool = False) -> str:
    """Calico's `natOutgoing` as an nftables table for a node.

    Felix's rule (felix/rules/nat.go, `NATOutgoingChain` and `makeNATOutgoingRuleIPTables`): source
    in a natOutgoing pool, destination in no pool, action `MasqAction`, which felix renders as
    `MASQUERADE --random-fully` when `MASQFullyRandom` is detected (felix/iptables/actions.go;
    felix/environment/feature_detect.go: iptables >= 1.6.2 and kernel >= 3.14, so every supported
    node OS) and Calico's nftables data plane as `masquerade fully-random`, this rule
    (felix/nftables/actions.go). Both set the kernel's NF_NAT_RANGE_PROTO_RANDOM_FULLY: the node's
    source port is drawn at random from 1024-65535 (net/netfilter/nf_nat_core.c,
    `nf_nat_l4proto_unique_tuple`), whichever port the pod used.

    `keep_source_port`: the same rule with its port range narrowed to the pod's own source port
    (TCP and UDP), so a test can put the node's port where it wants (every NodePort, say) instead
    of waiting for the random draw to land there. Everything else (the match, the masquerade, the
    flag, conntrack's un-NAT of the reply) is unchanged."""
    match = f"ip saddr {pod_pool} ip daddr != {pod_pool}"
    forced = f"    {match} meta l4proto {{ tcp, udp }} masquerade to :th sport fully-random\n" if keep_source_port else ""
    return (
        "table ip calico-double {\n"
        "  chain nat-outgoing {\n"
        "    type nat hook postrouting priority srcnat; policy accept;\n"
        f"{forced}"
        f"    {match} masquerade fully-random\n"
        "  }\n"
        "}\n"
    )


class Lab:
    """Namespaces made here, deleted by `close` (and their processes ended).

    Building only records what to do; `flush` does it with few processes (the namespaces in one
    `ip -batch`, then per namespace one shell running its `ip -batch`, its sysctls and its nft
    rulesets), the hub first so that every veth end exists before its namespace configures it."""

    def __init__(self, nft: str, workdir: Path) -> None:
        self.nft = nft
        self.workdir = workdir
        self.tag = f"fl{os.getpid() % 100000}x{next(_counter)}"
        self.namespaces: list[str] = []
        self.processes: list[subprocess.Popen[str]] = []
        self.listeners: list[Listeners] = []
        self._legs = itertools.count()
        self._pending: dict[str, tuple[list[str], list[str], list[str]]] = {}
        self._created = 0
        self.hub = self.namespace("hub")
        for bridge in ("brm", "brr"):
            self.ip(self.hub, "link", "add", bridge, "type", "bridge")
            self.ip(self.hub, "link", "set", bridge, "up")

    # --- building ---------------------------------------------------------------------------
    def namespace(self, role: str) -> str:
        name = f"{self.tag}-{role}"
        self.namespaces.append(name)
        self._pending[name] = ([], [], [])
        self.sysctl(name, "net.ipv4.conf.all.rp_filter", "0")
        self.sysctl(name, "net.ipv4.conf.default.rp_filter", "0")
        self.ip(name, "link", "set", "lo", "up")
        return name

    def ip(self, namespace: str, *args: str) -> None:
        """An `ip` command in `namespace`, now if it was flushed already, else at the flush."""
        if namespace in self._pending:
            self._pending[namespace][0].append(" ".join(args))
        else:
            run("ip", "-n", namespace, *args)

    def sysctl(self, namespace: str, key: str, value: str) -> None:
        self._pending[namespace][1].append(f"{key}={value}")

    def load(self, namespace: str, ruleset: str) -> None:
        """An nftables ruleset for `namespace` (loaded at the flush, after its links)."""
        if namespace in self._pending:
            self._pending[namespace][2].append(ruleset)
        else:
            run("ip", "netns", "exec", namespace, self.nft, "-f", "-", stdin=ruleset)

    def flush(self) -> None:
        names = [n for n in self.namespaces if n in self._pending]
        run("ip", "-batch", "-", stdin="".join(f"netns add {n}\n" for n in names))
        self._created = len(self.namespaces)
        for name in names:
            commands, sysctls, rulesets = self._pending.pop(name)
            script = "set -e\nip -batch - <<'EOF'\n" + "\n".join(commands) + "\nEOF\n"
            if sysctls:
                script += "sysctl -qw " + " ".join(sysctls) + " >/dev/null\n"
            for i, ruleset in enumerate(rulesets):
                path = self.workdir / f"{name}-{i}.nft"
                path.write_text(ruleset)
                script += f"{self.nft} -f {path}\n"
            run("ip", "netns", "exec", name, "sh", "-c", script)

    def machine(self, role: str, management: Sequence[str] = (), rdma: Sequence[str] = ()) -> str:
        """A namespace with legs on the management (`eth0`) and RDMA (`eth1`) segments, holding
        `management`/`rdma` addresses (CIDR notation), default route on-link out of its first leg."""
        name = self.namespace(role)
        legs = [("eth0", "brm", management), ("eth1", "brr", rdma)]
        first = None
        for device, bridge, addresses in legs:
            if not addresses:
                continue
            hub_end = f"v{next(self._legs)}{self.tag[-4:]}"
            self.ip(self.hub, "link", "add", hub_end, "type", "veth", "peer", "name", device, "netns", name)
            self.ip(self.hub, "link", "set", hub_end, "master", bridge, "up")
            for address in addresses:
                self.ip(name, "addr", "add", address, "dev", device)
            self.ip(name, "link", "set", device, "up")
            first = first or device
        if first:
            self.ip(name, "route", "add", "default", "dev", first)
        return name

    def node(
        self, role: str, management: str, rdma: str | None, pod_pool: str, *, keep_source_port: bool = False
    ) -> str:
        """A node: forwards, and masquerades what its pods send outside every IP pool (natOutgoing,
        as Calico does: `nat_outgoing`)."""
        name = self.machine(role, [management], [rdma] if rdma else [])
        self.sysctl(name, "net.ipv4.ip_forward", "1")
        self.load(name, nat_outgoing(pod_pool, keep_source_port=keep_source_port))
        return name

    def pod(self, role: str, node: str, address: str) -> str:
        """A pod on `node`, wired as Calico wires it."""
        name = self.namespace(role)
        host_end = f"c{next(self._legs)}{self.tag[-4:]}"
        self.ip(node, "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", name)
        self.ip(node, "link", "set", host_end, "up")
        self.sysctl(node, f"net.ipv4.conf.{host_end}.proxy_arp", "1")
        # Calico sets it too (felix/dataplane/linux/endpoint_mgr.go): ARP by proxy answers at once,
        # not after the kernel's random delay of up to 0.8 s.
        self.sysctl(node, f"net.ipv4.neigh.{host_end}.proxy_delay", "0")
        self.ip(node, "route", "add", f"{address}/32", "dev", host_end)
        self.ip(name, "addr", "add", f"{address}/32", "dev", "eth0")
        self.ip(name, "link", "set", "eth0", "up")
        self.ip(name, "route", "add", "169.254.1.1", "dev", "eth0")
        self.ip(name, "route", "add", "default", "via", "169.254.1.1", "dev", "eth0")
        return name

    def start(self, namespace: str, command: Sequence[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            ["ip", "netns", "exec", namespace, *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.processes.append(process)
        return process

    def listen(
        self, ports: Mapping[str, tuple[Iterable[int], Iterable[int]]], ipip: Iterable[str] = ()
    ) -> Listeners:
        """Listeners on (TCP, UDP) ports in each namespace, and IP-in-IP echoes in the `ipip`
        namespaces, until `close`."""
        listeners = Listeners(ports, ipip)
        self.listeners.append(listeners)
        return listeners

    def exec(self, namespace: str, *command: str, env: dict[str, str] | None = None) -> str:
        result = subprocess.run(
            ["ip", "netns", "exec", namespace, *command],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, **(env or {})},
            timeout=60,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} in {namespace}: {result.stderr.strip()}")
        return result.stdout + result.stderr

    # --- probing ----------------------------------------------------------------------------
    def probe(self, probes: Sequence[Probe]) -> list[bool]:
        """Whether each connection opened (UDP: was echoed), all at once with one deadline."""
        return _in_thread(lambda: _probe_all(probes))

    def close(self) -> None:
        for listeners in self.listeners:
            listeners.close()
        for process in self.processes:
            process.kill()
            process.wait()
        for name in reversed(self.namespaces[: self._created]):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def write(path: Path, text: str, mode: int = 0o644) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def _probe_all(probes: Sequence[Probe]) -> list[bool]:
    selector = selectors.DefaultSelector()
    result: dict[int, bool] = {}
    for i, p in enumerate(probes):
        enter(p.namespace)
        if p.protocol == "ipip":
            # Not connected: a connected raw socket takes the ICMP error the target's kernel sends
            # when no tunnel claims the packet (net/ipv4/tunnel4.c) as its own error (raw_err).
            raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, IPIP)
            raw.setblocking(False)
            raw.bind((p.source, 0))
            raw.sendto(IPIP_PROBE, (p.target, 0))
            selector.register(raw, selectors.EVENT_READ, i)
            continue
        kind = socket.SOCK_STREAM if p.protocol == "tcp" else socket.SOCK_DGRAM
        sock = socket.socket(socket.AF_INET, kind)
        sock.setblocking(False)
        sock.bind((p.source, p.source_port))
        if p.protocol == "tcp":
            code = sock.connect_ex((p.target, p.port))
            if code not in (0, errno.EINPROGRESS):
                result[i] = False
                sock.close()
                continue
            selector.register(sock, selectors.EVENT_WRITE, i)
        else:
            sock.connect((p.target, p.port))
            sock.send(b"probe")
            selector.register(sock, selectors.EVENT_READ, i)
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    last_look = False
    while selector.get_map() and not last_look:
        # One more look once the deadline passed: a handshake the kernel completed in time counts
        # even if this thread was not scheduled to see it (a busy machine).
        last_look = time.monotonic() >= deadline
        for key, _ in selector.select(max(0.0, deadline - time.monotonic())):
            sock = cast(socket.socket, key.fileobj)
            if sock.type == socket.SOCK_STREAM:
                result[key.data] = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
            elif sock.type == socket.SOCK_RAW:
                packet, peer = sock.recvfrom(256)
                if peer[0] != probes[key.data].target or _raw_payload(packet) != IPIP_ECHO:
                    continue  # another probe's packet or echo: keep waiting for this one's
                result[key.data] = True
            else:
                try:
                    result[key.data] = sock.recv(64) == b"probe"
                except OSError:
                    result[key.data] = False
            selector.unregister(sock)
            sock.close()
    for key in list(selector.get_map().values()):
        result[key.data] = False
        cast(socket.socket, key.fileobj).close()
    selector.close()
    return [result[i] for i in range(len(probes))]
