"""Real etcd members in the flow lab's control-plane namespaces, joined as kubeadm joins a
control-plane node, with the membership sync of the nodes' user-data run at each change
(tests/flows/test_flow_matrix.py's day-two moments)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.flows.cluster import Cluster
from tests.flows.shapes import Shape, node_address
from tests.real_parts import require_program

# --- etcd, joined as kubeadm joins a control-plane node ------------------------------------------
ETCD_TIMING = ["--heartbeat-interval", "50", "--election-timeout", "500", "--strict-reconfig-check=false"]
"""Short elections, and no wait for a new peer's 5 s of health before the next membership change
(`HealthInterval`): kubeadm retries those refusals for minutes; the test would only wait. Neither
touches what is checked: that members reach each other's peer port to catch up and stay healthy."""


class Etcd:
    """Real etcd members in the control-plane namespaces (plain HTTP: the firewall sees ports and
    addresses, not TLS; the sync's client certificates are curl options it ignores for http)."""

    def __init__(self, cluster: Cluster, etcd: str, etcdctl: str, tmp: Path) -> None:
        self.cluster, self.etcd, self.etcdctl, self.tmp = cluster, etcd, etcdctl, tmp
        self.members: dict[str, subprocess.Popen[str]] = {}

    def start(self, key: str, address: str, initial_cluster: str, state: str) -> None:
        name = key.removesuffix("-old")
        self.members[key] = self.cluster.lab.start(
            self.cluster.namespaces[key],
            [
                self.etcd, "--name", name, "--data-dir", str(self.tmp / f"etcd-{key}"),
                "--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", f"http://{address}:2379",
                "--listen-peer-urls", "http://0.0.0.0:2380", "--initial-advertise-peer-urls", f"http://{address}:2380",
                "--initial-cluster", initial_cluster, "--initial-cluster-state", state,
                "--logger", "zap", "--log-outputs", "stderr", "--log-level", "error", *ETCD_TIMING,
            ],
        )  # fmt: skip

    def ctl(self, key: str, *args: str, endpoint: str = "http://127.0.0.1:2379") -> str:
        return self.cluster.lab.exec(
            self.cluster.namespaces[key],
            self.etcdctl, "--endpoints", endpoint, "--dial-timeout", "2s", "--command-timeout", "4s", *args,
            env={"ETCDCTL_API": "3"},
        )  # fmt: skip

    def retried(self, key: str, *args: str, endpoint: str, deadline_s: float = 15.0) -> str:
        """A membership change, retried as kubeadm retries it (`etcdutil` backoff) while the
        cluster elects a leader or settles after the last change."""
        until = time.monotonic() + deadline_s
        while True:
            try:
                return self.ctl(key, *args, endpoint=endpoint)
            except RuntimeError:
                if time.monotonic() > until:
                    raise
                time.sleep(0.2)

    def wait_healthy(self, key: str, deadline_s: float = 20.0) -> None:
        until = time.monotonic() + deadline_s
        while True:
            try:
                self.ctl(key, "endpoint", "health")
                return
            except RuntimeError:
                if time.monotonic() > until:
                    raise AssertionError(f"etcd on {key} never became healthy") from None
                time.sleep(0.1)

    def sync(self, nft: str) -> None:
        """One tick of each running member's membership sync (what its timer does every 5 s)."""
        for key in self.members:
            script = self.cluster.sync_scripts.get(key)
            if script is not None:
                self.cluster.lab.exec(
                    self.cluster.namespaces[key],
                    str(script),
                    env={"GPUCLUSTER_ETCD_ENDPOINT": "http://127.0.0.1:2379", "GPUCLUSTER_NFT": nft},
                )

    def member_id(self, key: str, name: str) -> str:
        members = json.loads(self.ctl(key, "member", "list", "-w", "json"))["members"]
        return next(format(m["ID"], "x") for m in members if m.get("name") == name)

    def join(self, joining: str, through: str, address: str, nft: str) -> None:
        """kubeadm's join of a control-plane node: add it as a learner through an existing
        member's client port (from the joining node), start it, promote it once caught up."""
        seed = node_address(self.cluster.moment, "cp-1")
        added = self.retried(
            joining, "member", "add", joining, "--peer-urls", f"http://{address}:2380", "--learner",
            endpoint=f"http://{seed}:2379",
        )  # fmt: skip
        initial = next(
            line.split("=", 1)[1].strip('"') for line in added.splitlines() if "ETCD_INITIAL_CLUSTER=" in line
        )
        self.sync(nft)
        self.start(joining, address, initial, "existing")
        until = time.monotonic() + 15.0
        while True:
            try:
                member = self.member_id(through, joining)
                self.ctl(through, "member", "promote", member)
                return
            except (RuntimeError, StopIteration) as error:
                if time.monotonic() > until:
                    raise AssertionError(
                        f"etcd on {joining} ({address}) never caught up to be promoted: the old members' "
                        f"peer port does not let it in ({error})"
                    ) from None
                time.sleep(0.2)


def run_membership(cluster: Cluster, shape: Shape, nft: str, tmp: Path) -> None:
    etcd_bin, etcdctl = (
        require_program("etcd", "/usr/bin/etcd", "etcd-server"),
        require_program("etcdctl", "/usr/bin/etcdctl", "etcd-client"),
    )
    etcd = Etcd(cluster, etcd_bin, etcdctl, tmp)
    moment = cluster.moment
    first = [n.name for n in moment.old.control_plane_nodes]
    keys = [f"{n}-old" if n in moment.removed else n for n in first]
    addresses = {key: node_address(moment, key.removesuffix("-old"), old=True) for key in keys}
    initial = ",".join(f"{key.removesuffix('-old')}=http://{address}:2380" for key, address in addresses.items())
    for key in keys:
        etcd.start(key, addresses[key], initial, "new")
    for key in keys:
        etcd.wait_healthy(key)
    etcd.sync(nft)
    for name in moment.removed:  # the stack removes the departing member, from the management network
        key = f"{name}-old"
        member = etcd.member_id("cp-1", name)
        seed = node_address(moment, "cp-1")
        etcd.retried("management-host", "member", "remove", member, endpoint=f"http://{seed}:2379")
        etcd.members.pop(key).kill()
        cluster.lab.ip(cluster.namespaces[key], "link", "set", "eth0", "down")
        etcd.sync(nft)
    for name in moment.joined:
        etcd.join(name, "cp-1", node_address(moment, name), nft)
        etcd.sync(nft)
    health = etcd.ctl("cp-1", "endpoint", "health", "--cluster")
    assert health.count("is healthy") == len(moment.new.control_plane_nodes), health
