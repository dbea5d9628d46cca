"""Issue 51 item 6: a vGPU profile change of a whole pool in one `pulumi up` finishes for every VM.

The power cycles run one at a time (a process-wide lock). Each VM's turn used to be waited for
inside its operation's deadline (`vcenterTimeoutSeconds`, 120 s), and its cycle bounded by it too
while the guest's own waits run to `powerTimeoutMinutes` (10 by default): the VMs behind the first
spent their deadline in the queue, about one VM moved per run. Here the bound is 1 s and the
guests' VMware Tools answer 1 s after power-on (vcsim/vm.go, `-tools-boot-delay`), so the queue and
the Tools wait both outlast it, as 120 s against a pool and a 10-minute shutdown do.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyVmomi import vim

from components.vsphere.provider_base import RetryPolicy
from components.vsphere.vgpu.attachment import POWER_ON_MARKER, VgpuAttachmentProvider
from tests.components.vsphere.conftest import CLUSTER_HOSTS, TEMPLATE_VM, _find
from tests.components.vsphere.graphics_helpers import set_active_graphics
from tests.components.vsphere.vm_helpers import (
    clone,
    destroy,
    off_windows,
    power_on,
    reconfigure,
    reserve_all_memory,
    timed_events,
    unique,
    vgpu_device_spec,
    vgpus,
)

pytestmark = pytest.mark.vcsim

BOUND_S = 1.0


def _inputs(vm: Any, profile: str) -> dict[str, Any]:
    return {"vm_id": vm.config.uuid, "vm_name": vm.name, "profiles": [profile], "extra_config": {}}


@pytest.fixture
def workers(si: Any, extended: Any) -> Iterator[list[Any]]:
    """Four GPU workers, one per host (a T4 holds one grid_t4-16c), cloned from a template that
    carries the vGPU device, as the program makes them."""
    template = clone(_find(si, vim.VirtualMachine, TEMPLATE_VM), unique("pool-gpu-template"))
    reconfigure(template, deviceChange=[vgpu_device_spec("grid_t4-16c")])
    made: list[Any] = []
    try:
        for name in CLUSTER_HOSTS:
            host = _find(si, vim.HostSystem, name)
            set_active_graphics(host, "sharedDirect")
            vm = clone(template, unique("pool-worker"), host)
            made.append(vm)
            reserve_all_memory(vm)
        yield made
    finally:
        for vm in [*made, template]:
            with contextlib.suppress(Exception):
                destroy(vm)


def test_four_profile_changes_in_one_run_all_finish(
    configured: Callable[..., Any], workers: list[Any], si: Any
) -> None:
    provider = configured(
        VgpuAttachmentProvider(
            power_timeout_minutes=0.1, retry=RetryPolicy(attempts=6, base_delay=0.1, max_delay=0.5, max_total=BOUND_S)
        )
    )
    for vm in workers:
        power_on(vm)  # just booted: Tools answer a second from now
    created = [provider.create(_inputs(vm, "grid_t4-16c")) for vm in workers]
    errors: list[BaseException] = []

    def change(vm: Any, old: Any) -> None:
        try:
            provider.update(old.id, old.outs, _inputs(vm, "grid_t4-8c"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=change, args=pair) for pair in zip(workers, created, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert [str(e) for e in errors] == []
    for vm in workers:
        assert (vgpus(vm), vm.runtime.powerState) == (["grid_t4-8c"], "poweredOn"), vm.name
        assert not [o for o in vm.config.extraConfig or [] if o.key == POWER_ON_MARKER and o.value == "true"]
    windows = sorted(w for vm in workers for w in off_windows(timed_events(si, vm)))
    assert len(windows) == 4
    for (_, first_on), (next_off, _) in itertools.pairwise(windows):
        assert first_on < next_off, f"two GPU workers were down at once: {windows}"
