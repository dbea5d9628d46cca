"""The operation both provider hosts run: our real `PvrdmaHostSettings` create, against the simulator.

A create logs in to vCenter, finds the host, reads `Net.PVRDMAVmknic` (`QueryOptions`), writes it
if it differs, limits the `pvrdma` firewall ruleset to the RDMA subnet and enables it, reads them
back and logs out
(components/vsphere/pvrdma_host.py). The simulator is started with a per-call delay on
`QueryOptions` (vcsim/method_delay.go), so each create blocks on vCenter for about twice that
delay, as a real create blocks on a real vCenter: that is where a provider host's worker pool
shows, and nothing else in the operation is faked.

`TimedPvrdmaProvider` adds when its create started and ended (wall clock, seconds) to the
outputs: the driver reads the intervals back and counts how many creates overlapped, which is the
concurrency the host actually gave us (the client only knows how many calls it has in flight, and a
host queues calls its workers cannot take yet).
"""

from __future__ import annotations

import time
from typing import Any

from components import resource_handlers as handlers
from components.vsphere.pvrdma_host import PvrdmaHostSettingsProvider

RESOURCE_TYPE = "pulumi-python:dynamic/vsphere:PvrdmaHostSettings"
"""The type token the engine gives our dynamic resource (components/dynamic_resource.py, module vsphere)."""
STARTED = "bench_started"
FINISHED = "bench_finished"
DELAYED_METHOD = "QueryOptions"
CALLS_PER_CREATE = 2
"""`QueryOptions` calls in one create: the option is read before and after (pvrdma_host._apply)."""
SIMULATOR_HOSTS = ("DC0_C0_H0", "DC0_C0_H1", "DC0_C0_H2", "DC0_C0_H3")
"""The harness's cluster hosts at its default shape (-cluster 1 -host 4)."""


class TimedPvrdmaProvider(PvrdmaHostSettingsProvider):
    """Our provider, its create timed into its outputs."""

    def create(self, props: dict[str, Any]) -> handlers.CreateResult:
        started = time.time()
        result = super().create(props)
        outs = dict(result.outs or {})
        outs[STARTED] = started
        outs[FINISHED] = time.time()
        return handlers.CreateResult(id_=result.id, outs=outs)


def inputs(index: int) -> dict[str, Any]:
    """The `index`-th resource's inputs: the hosts in turn, one vmknic each, the RDMA subnet the
    `pvrdma` ruleset admits."""
    return {
        "host_name": SIMULATOR_HOSTS[index % len(SIMULATOR_HOSTS)],
        "vmknic_device": "vmk1",
        "allowed_network": "192.168.50.0/24",
    }


def vsphere_config(url: str) -> dict[str, str]:
    """The raw stack config the engine hands a provider's Configure, for the simulator at `url`
    (http://user:pass@127.0.0.1:PORT/sdk, or https:// with the harness's `-tls`)."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    return {
        "vsphere:vsphereServer": f"{parts.scheme}://127.0.0.1:{parts.port}",
        "vsphere:user": unquote(parts.username or ""),
        "vsphere:password": unquote(parts.password or ""),
        "vsphere:allowUnverifiedSsl": "true",
    }


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end and a start at the same instant do not overlap)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    open_now = peak = 0
    for _, step in events:
        open_now += step
        peak = max(peak, open_now)
    return peak
