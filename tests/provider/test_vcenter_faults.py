"""Fault injection (issue 43): the real plugin process, driven over gRPC as the engine drives it,
against the vCenter simulator behind a fault proxy (tests/provider/fault_proxy.py): connections
reset before and after vCenter saw a request, during the login and mid-answer; answers stalled,
trickled, swallowed; sessions terminated; the plugin killed with SIGKILL mid-operation and the
same creates sent again, as a re-run of `pulumi up` sends them; objects deleted behind its back.

What each test asserts is convergence: exactly one of each object, nothing orphaned, the outputs a
clean run gives, and every call ended within its stated bound (`vcenterTimeoutSeconds`, set short
here; a copy's bound is the larger of it and twice its clone timeout).

The simulator is a harness process of this module's own, with clones that take
`CLONE_HOLD_S` (vcsim/clone_hold.go) so a clone can be caught in flight. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from components.vcenter.lookups import collect_properties
from components.vcenter.tasks import wait_for_task
from tests.components.vsphere.conftest import CLUSTER_HOSTS, HARNESS, TEMPLATE_VM, Vcsim, _find, _start
from tests.components.vsphere.vm_helpers import destroy, unique
from tests.provider import fault_proxy as fp
from tests.provider.plugin_process import Plugin, configure, running_plugin, vcsim_connection
from tests.provider.rpc import Lifecycle
from tests.real_parts import unavailable

pytestmark = pytest.mark.vcsim

MEMBER = "gpucluster:vsphere:DvsHostMember"
PVRDMA = "gpucluster:vsphere:PvrdmaHostSettings"
REPLICA = "gpucluster:vsphere:TemplateReplica"
RDMA_NET = "192.168.50.0/24"
CLONE_HOLD_S = 4.0
"""How long a clone to a name with HELD in it runs (vcsim/clone_hold.go): longer than a plugin's
restart, so a re-run finds it still running. Other clones are instant."""
HELD = "-held-"
BOUND_S = 3.0
"""`vcenterTimeoutSeconds` of the bound tests: each vCenter operation's wall-clock bound."""
CLONE_TIMEOUT_MIN = 0.05
"""3 s: a copy's bound is then max(BOUND_S, 2 x 3 s) = 6 s."""
RERUN_BOUND_S = 8.0
"""The convergence test's bound: a copy's is then max(8 s, 2 x 3 s) = 8 s too."""
SLACK = 1.1
"""Issue 43: no call longer than its stated bound plus 10 %."""


@pytest.fixture(scope="module")
def sim(vcsim: Vcsim) -> Iterator[Vcsim]:
    """A harness of this module's own; `vcsim` (the shared one) builds it first when it is missing
    or older than vcsim/*.go."""
    if not vcsim.extended or not HARNESS.exists():
        unavailable("vCenter simulator harness", f"{HARNESS} missing (bash scripts/build-vcsim.sh)")
    process, url = _start(
        [
            *(str(HARNESS), "-port", "0", "-exit-on-stdin-eof"),
            *("-clone-hold", f"{int(CLONE_HOLD_S * 1000)}ms", "-clone-hold-only", HELD),
        ],
        prefixes=("VCSIM_URL=",),
    )
    yield Vcsim(url=url, extended=True, process=process)
    if process.stdin is not None:
        process.stdin.close()
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")
def direct(sim: Vcsim) -> Iterator[Any]:
    """A session of the test's own, not through the proxy: to arrange and to inspect."""
    service = SmartConnect(protocol="http", host="127.0.0.1", port=sim.port, user=sim.user, pwd=sim.password)
    yield service
    Disconnect(service)


@pytest.fixture
def proxy(sim: Vcsim) -> Iterator[fp.FaultProxy]:
    made = fp.FaultProxy(sim.port)
    yield made
    made.close()


@contextlib.contextmanager
def plugin_through(proxy: fp.FaultProxy, sim: Vcsim, bound_s: float = BOUND_S) -> Iterator[Plugin]:
    """A fresh plugin process (a `pulumi up` of its own) whose vCenter is the proxy."""
    with running_plugin() as plugin:
        args = vcsim_connection(proxy.port, sim.user, sim.password, vcenterTimeoutSeconds=bound_s)
        configure(plugin.stub, args, secret={"password"})
        yield plugin


def _parallel(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run calls as the engine runs independent steps; an RpcError is returned, not raised."""

    def guarded(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except grpc.RpcError as exc:
            return exc

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(guarded, calls))


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.monotonic()
    try:
        result = call()
    except grpc.RpcError as exc:
        result = exc
    return time.monotonic() - started, result


# ---------------------------------------------------------------------------------------------
# Arranging and reading the simulator


def _pvrdma(direct: Any, name: str) -> tuple[str, bool]:
    host = _find(direct, vim.HostSystem, name)
    option = host.configManager.advancedOption.QueryOptions("Net.PVRDMAVmknic")[0].value
    enabled = next(r.enabled for r in host.configManager.firewallSystem.firewallInfo.ruleset if r.key == "pvrdma")
    return option, enabled


def _reset_pvrdma(direct: Any, name: str) -> None:
    host = _find(direct, vim.HostSystem, name)
    host.configManager.advancedOption.UpdateOptions(
        changedValue=[vim.option.OptionValue(key="Net.PVRDMAVmknic", value="")]
    )
    host.configManager.firewallSystem.DisableRuleset(id="pvrdma")
    host.configManager.firewallSystem.UpdateRuleset(
        id="pvrdma", spec=vim.host.Ruleset.RulesetSpec(allowedHosts=vim.host.Ruleset.IpList(allIp=True))
    )


def _pvrdma_inputs(host: str) -> dict[str, Any]:
    return {"host_name": host, "vmknic_device": "vmk1", "allowed_network": RDMA_NET}


def _pvrdma_outputs(host: str) -> dict[str, Any]:
    """What a clean create on a host in ESXi's defaults answers."""
    return {
        **_pvrdma_inputs(host),
        "ruleset_enabled": True,
        "previous_vmknic": "",
        "previous_ruleset_enabled": False,
        "allowed_all_ip": False,
        "allowed_hosts": [RDMA_NET],
        "previous_allowed_all_ip": True,
        "previous_allowed_hosts": [],
    }


@pytest.fixture
def switch(direct: Any) -> Iterator[Any]:
    datacenter = direct.RetrieveContent().rootFolder.childEntity[0]
    spec = vim.DistributedVirtualSwitch.CreateSpec(
        configSpec=vim.dvs.VmwareDistributedVirtualSwitch.ConfigSpec(name=unique("faults-dvs"))
    )
    dvs = wait_for_task(datacenter.networkFolder.CreateDVS_Task(spec=spec))
    yield dvs
    with contextlib.suppress(Exception):  # a test may have destroyed it
        wait_for_task(dvs.Destroy_Task())


def _members(dvs: Any) -> list[str]:
    return sorted(host.name for host in dvs.summary.hostMember or [])


@pytest.fixture
def gold(direct: Any) -> Iterator[Any]:
    """A template with one snapshot, `base`."""
    source = _find(direct, vim.VirtualMachine, TEMPLATE_VM)
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=False)
    template = wait_for_task(source.CloneVM_Task(folder=source.parent, name=unique("faults-gold"), spec=spec))
    wait_for_task(template.CreateSnapshot_Task(name="base", memory=False, quiesce=False))
    template.MarkAsTemplate()
    yield template
    for vm in _copies(direct, template.name):
        destroy(vm)
    destroy(template)


def _copy_inputs(direct: Any, gold: Any, host_name: str) -> dict[str, Any]:
    host = _find(direct, vim.HostSystem, host_name)
    pool = _find(direct, vim.ClusterComputeResource, "DC0_C0").resourcePool
    return {
        "name": f"{gold.name}-{host_name}",
        "source_uuid": gold.config.uuid,
        "source_name": gold.name,
        "host_id": host._moId,
        "host_name": host_name,
        "datastore_id": gold.datastore[0]._moId,
        "resource_pool_id": pool._moId,
        "linked": True,
        "snapshot_name": "base",
        "clone_timeout_minutes": CLONE_TIMEOUT_MIN,
        "stack": "faults",
    }


def _copies(direct: Any, gold_name: str) -> list[Any]:
    """Every VM in the inventory made from this template by a create (its name's prefix)."""
    everything = collect_properties(direct, direct.RetrieveContent().rootFolder, vim.VirtualMachine, ["name"])
    return [vm for vm, props in everything if props.get("name", "").startswith(f"{gold_name}-")]


def _copy_names(direct: Any, gold_name: str) -> list[str]:
    return sorted(vm.name for vm in _copies(direct, gold_name))


# ---------------------------------------------------------------------------------------------
# Item 1: a connection fault during the login


def test_a_reset_during_the_login_is_retried(proxy: fp.FaultProxy, sim: Vcsim, direct: Any) -> None:
    """pyVmomi's Connect turned this reset into HostConnectFault, which was never retried."""
    host = CLUSTER_HOSTS[1]
    _reset_pvrdma(direct, host)
    proxy.rule = fp.on_method("RetrieveServiceContent", fp.RESET_BEFORE)
    try:
        with plugin_through(proxy, sim) as plugin:
            settings = Lifecycle(plugin.stub, PVRDMA, f"pvrdma-{host}")
            id_, outs, _ = settings.create(_pvrdma_inputs(host))
        assert (id_, outs) == (f"pvrdma:{host}", _pvrdma_outputs(host))
        assert fp.RESET_BEFORE in proxy.faults()
        assert _pvrdma(direct, host) == ("vmk1", True)
    finally:
        _reset_pvrdma(direct, host)


# ---------------------------------------------------------------------------------------------
# Items 2 and 3: a copy whose answer was lost


def _kill_when(plugin: Plugin, proxy: fp.FaultProxy, method: str, timeout_s: float = 10.0) -> None:
    assert fp.wait_until(lambda: method in proxy.methods(), timeout_s), proxy.methods()
    time.sleep(0.1)  # the request is at vCenter; its answer is held by the proxy
    plugin.process.kill()
    plugin.process.wait()


def test_a_rerun_while_the_clone_still_runs_waits_for_it_instead_of_cloning_again(
    proxy: fp.FaultProxy, sim: Vcsim, direct: Any, gold: Any
) -> None:
    """The plugin killed while vCenter clones (its answer held), the same create at once: one copy."""
    copy = {
        **_copy_inputs(direct, gold, CLUSTER_HOSTS[2]),
        "name": f"{gold.name}{HELD}{CLUSTER_HOSTS[2]}",
        "clone_timeout_minutes": 2 * CLONE_HOLD_S / 60,
    }
    proxy.rule = fp.on_method("CloneVM_Task", fp.STALL)
    with plugin_through(proxy, sim) as first:
        replica = Lifecycle(first.stub, REPLICA, "copy")
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(_timed, lambda: replica.create(copy))
            _kill_when(first, proxy, "CloneVM_Task")
            assert isinstance(pending.result()[1], grpc.RpcError)
    proxy.rule = lambda _c, _i, _r: fp.PASS
    with plugin_through(proxy, sim) as rerun:
        id_, outs, _ = Lifecycle(rerun.stub, REPLICA, "copy").create(copy)

    assert proxy.methods().count("CloneVM_Task") == 1
    names = _copy_names(direct, gold.name)
    assert names == [outs["vm_name"]]
    made = _copies(direct, gold.name)[0]
    assert id_ == made.config.uuid and made.config.template and outs["snapshot"] == "base"


def test_a_rerun_adopts_the_finished_copy_whose_answer_was_lost(
    proxy: fp.FaultProxy, sim: Vcsim, direct: Any, gold: Any
) -> None:
    """The plugin killed after the copy became a template: the re-run adopts it, not refuses it."""
    copy = _copy_inputs(direct, gold, CLUSTER_HOSTS[3])
    proxy.rule = fp.on_method("MarkAsTemplate", fp.STALL, then=fp.STALL)
    with plugin_through(proxy, sim) as first:
        replica = Lifecycle(first.stub, REPLICA, "copy")
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(_timed, lambda: replica.create(copy))
            _kill_when(first, proxy, "MarkAsTemplate")
            assert isinstance(pending.result()[1], grpc.RpcError)
    (finished,) = _copies(direct, gold.name)
    assert finished.config.template
    proxy.rule = lambda _c, _i, _r: fp.PASS
    with plugin_through(proxy, sim) as rerun:
        id_, outs, _ = Lifecycle(rerun.stub, REPLICA, "copy").create(copy)

    assert id_ == finished.config.uuid
    assert _copy_names(direct, gold.name) == [finished.name] == [outs["vm_name"]]
    assert outs["snapshot"] == "base"


# ---------------------------------------------------------------------------------------------
# Items 4, 5 and 6: switch batches


def test_a_host_without_the_pnic_fails_alone_at_once_and_the_others_join(
    proxy: fp.FaultProxy, sim: Vcsim, switch: Any
) -> None:
    hosts = CLUSTER_HOSTS
    with plugin_through(proxy, sim, bound_s=20.0) as plugin:
        members = {host: Lifecycle(plugin.stub, MEMBER, f"member-{host}") for host in hosts}
        vmnics = {host: ["vmnic9" if host == hosts[2] else "vmnic4"] for host in hosts}
        elapsed_and_results = _parallel(
            [
                lambda h=h: _timed(
                    lambda: members[h].create({"host_name": h, "switch_uuid": switch.uuid, "vmnics": vmnics[h]})
                )
                for h in hosts
            ]
        )
    results = dict(zip(hosts, (r for _, r in elapsed_and_results), strict=True))
    refused = results.pop(hosts[2])
    assert isinstance(refused, grpc.RpcError)
    assert hosts[2] in refused.details() and "vmnic9 not found" in refused.details(), refused.details()
    assert not any(other in refused.details() for other in results), refused.details()
    assert all(not isinstance(r, Exception) for r in results.values()), results
    assert _members(switch) == sorted(results)
    # Lasting: not retried. One batch of four, then halves until the host is alone: at most 1 + 2 + 2.
    assert proxy.methods().count("ReconfigureDvs_Task") <= 5, proxy.methods()
    assert max(elapsed for elapsed, _ in elapsed_and_results) < 10


def test_a_batch_killed_after_its_reconfigure_reached_vcenter_is_applied_once(
    proxy: fp.FaultProxy, sim: Vcsim, switch: Any
) -> None:
    hosts = CLUSTER_HOSTS
    inputs = {host: {"host_name": host, "switch_uuid": switch.uuid, "vmnics": ["vmnic4"]} for host in hosts}
    before = int(switch.config.configVersion or 0)
    proxy.rule = fp.on_method("ReconfigureDvs_Task", fp.STALL, then=fp.STALL)
    with plugin_through(proxy, sim) as first, ThreadPoolExecutor(len(hosts)) as pool:
        pending = [
            pool.submit(_timed, lambda h=h: Lifecycle(first.stub, MEMBER, f"member-{h}").create(inputs[h]))
            for h in hosts
        ]
        _kill_when(first, proxy, "ReconfigureDvs_Task")
        assert all(isinstance(p.result()[1], grpc.RpcError) for p in pending)
    proxy.rule = lambda _c, _i, _r: fp.PASS
    with plugin_through(proxy, sim) as rerun:
        answers = _parallel([lambda h=h: Lifecycle(rerun.stub, MEMBER, f"member-{h}").create(inputs[h]) for h in hosts])

    assert [a[1] for a in answers] == [inputs[h] for h in hosts]
    assert _members(switch) == sorted(hosts)
    assert int(switch.config.configVersion) == before + 1  # one reconfigure in all: the first run's


def test_a_member_of_a_switch_deleted_behind_the_plugins_back_is_deleted(
    proxy: fp.FaultProxy, sim: Vcsim, switch: Any
) -> None:
    """`pulumi destroy` after the switch went (by hand, or first in a destroy without refresh)."""
    host = CLUSTER_HOSTS[0]
    props = {"host_name": host, "switch_uuid": switch.uuid, "vmnics": ["vmnic4"]}
    with plugin_through(proxy, sim) as plugin:
        member = Lifecycle(plugin.stub, MEMBER, f"member-{host}")
        id_, outs, _ = member.create(props)
        wait_for_task(switch.Destroy_Task())
        assert member.read(id_, outs)[0] == ""
        member.delete(id_, outs)  # raised "switch not found" before


# ---------------------------------------------------------------------------------------------
# Item 7: every call bounded in wall-clock time


@pytest.mark.parametrize("fault", [fp.TRICKLE, fp.STALL, fp.BLACK_HOLE])
def test_a_trickling_or_silent_vcenter_ends_each_call_within_its_bound(
    proxy: fp.FaultProxy, sim: Vcsim, fault: str
) -> None:
    host = CLUSTER_HOSTS[3]
    proxy.trickle_interval_s = 0.2
    with plugin_through(proxy, sim) as plugin:
        settings = Lifecycle(plugin.stub, PVRDMA, f"pvrdma-{host}")
        # After the login, each request of the operation gets the fault (a black hole: every later one).
        proxy.rule = fp.on_method("QueryOptions", fault, times=10**6)
        elapsed, result = _timed(
            lambda: plugin.stub.Create(settings_request(settings, _pvrdma_inputs(host)), timeout=BOUND_S * SLACK + 2)
        )
    assert isinstance(result, grpc.RpcError)
    assert result.code() != grpc.StatusCode.DEADLINE_EXCEEDED, f"still running after {elapsed:.1f}s"
    assert elapsed <= BOUND_S * SLACK, f"{elapsed:.2f}s > {BOUND_S}s + 10%: {result.details()}"
    assert f"{BOUND_S:g}s bound" in result.details(), result.details()


def settings_request(lifecycle: Lifecycle, props: dict[str, Any]) -> Any:
    from pulumi.runtime.proto import provider_pb2

    from tests.provider.plugin_process import marshal

    return provider_pb2.CreateRequest(urn=lifecycle.urn, properties=marshal(props))


def test_a_copy_whose_vcenter_goes_silent_mid_clone_ends_within_its_bound(
    proxy: fp.FaultProxy, sim: Vcsim, direct: Any, gold: Any
) -> None:
    copy = _copy_inputs(direct, gold, CLUSTER_HOSTS[1])
    bound = max(BOUND_S, 2 * CLONE_TIMEOUT_MIN * 60)
    proxy.rule = fp.on_method("CloneVM_Task", fp.STALL, then=fp.STALL)
    with plugin_through(proxy, sim) as plugin:
        replica = Lifecycle(plugin.stub, REPLICA, "copy")
        elapsed, result = _timed(lambda: plugin.stub.Create(settings_request(replica, copy), timeout=bound * SLACK + 2))
    assert isinstance(result, grpc.RpcError) and result.code() != grpc.StatusCode.DEADLINE_EXCEEDED
    assert elapsed <= bound * SLACK, f"{elapsed:.2f}s > {bound}s + 10%"


# ---------------------------------------------------------------------------------------------
# Item 8: the engine's message


def test_a_failed_call_shows_the_handlers_one_line_reason(proxy: fp.FaultProxy, sim: Vcsim) -> None:
    with plugin_through(proxy, sim) as plugin, pytest.raises(grpc.RpcError) as refused:
        Lifecycle(plugin.stub, PVRDMA, "pvrdma-nowhere").create(_pvrdma_inputs("esxi-nowhere"))
    details = refused.value.details()
    assert "Unexpected" not in details and "Traceback" not in details and 'File "' not in details, details
    assert "\n" not in details
    assert "ESXi host 'esxi-nowhere' not found in vCenter" in details, details


# ---------------------------------------------------------------------------------------------
# Sessions terminated, objects deleted behind the plugin's back


def test_sessions_terminated_mid_operation_are_logged_in_again_and_each_change_made_once(
    proxy: fp.FaultProxy, sim: Vcsim, direct: Any, switch: Any
) -> None:
    hosts = CLUSTER_HOSTS
    own = direct.content.sessionManager.currentSession.key
    stop = False

    def terminate() -> None:
        manager = direct.content.sessionManager
        while not stop:
            others = [s.key for s in manager.sessionList or [] if s.key != own]
            if others:
                with contextlib.suppress(Exception):
                    manager.TerminateSession(sessionId=others)
            time.sleep(0.3)

    with plugin_through(proxy, sim, bound_s=20.0) as plugin, ThreadPoolExecutor(1) as killer:
        killer.submit(terminate)
        try:
            results = _parallel(
                [
                    lambda h=h: Lifecycle(plugin.stub, MEMBER, f"member-{h}").create(
                        {"host_name": h, "switch_uuid": switch.uuid, "vmnics": ["vmnic4"]}
                    )
                    for h in hosts
                ]
            )
        finally:
            stop = True
    assert [r for r in results if isinstance(r, Exception)] == []
    assert _members(switch) == sorted(hosts)


def test_a_copy_deleted_behind_the_plugins_back_reads_as_gone_and_deletes_cleanly(
    proxy: fp.FaultProxy, sim: Vcsim, direct: Any, gold: Any
) -> None:
    copy = _copy_inputs(direct, gold, CLUSTER_HOSTS[0])
    with plugin_through(proxy, sim) as plugin:
        replica = Lifecycle(plugin.stub, REPLICA, "copy")
        id_, outs, _ = replica.create(copy)
        (made,) = _copies(direct, gold.name)
        wait_for_task(made.Destroy_Task())
        assert replica.read(id_, outs)[0] == ""
        replica.delete(id_, outs)
    assert _copies(direct, gold.name) == []


# ---------------------------------------------------------------------------------------------
# Done when: every second connection reset, and the stack's creates converge within three re-runs


@pytest.mark.parametrize(
    "rule",
    [
        pytest.param(fp.every_second_connection, id="every-second-connection"),
        pytest.param(fp.random_resets(seed=43), id="random-resets-mid-operation"),
    ],
)
def test_with_connections_reset_joins_copies_and_pvrdma_converge_within_three_reruns(
    proxy: fp.FaultProxy, sim: Vcsim, direct: Any, switch: Any, gold: Any, rule: fp.Rule
) -> None:
    """Issue 43's "done when": every second connection reset (at its first request: the login of
    every second session), and resets at random points of an operation (after a clone or a
    reconfigure reached vCenter, too). Each re-run is a fresh plugin sending the creates that have
    not succeeded yet, all at once, as the engine does."""
    joins = CLUSTER_HOSTS
    copy_hosts = CLUSTER_HOSTS[:2]
    pvrdma_hosts = CLUSTER_HOSTS[2:]
    for host in pvrdma_hosts:
        _reset_pvrdma(direct, host)
    wanted: dict[tuple[str, str], dict[str, Any]] = {}
    for host in joins:
        wanted[(MEMBER, f"member-{host}")] = {"host_name": host, "switch_uuid": switch.uuid, "vmnics": ["vmnic4"]}
    for host in copy_hosts:
        wanted[(REPLICA, f"copy-{host}")] = _copy_inputs(direct, gold, host)
    for host in pvrdma_hosts:
        wanted[(PVRDMA, f"pvrdma-{host}")] = _pvrdma_inputs(host)
    created: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    proxy.rule = rule
    runs = 0
    try:
        while len(created) < len(wanted) and runs < 3:
            runs += 1
            todo = [key for key in wanted if key not in created]
            with plugin_through(proxy, sim, bound_s=RERUN_BOUND_S) as plugin:
                timed = _parallel(
                    [lambda key=key: _timed(lambda: Lifecycle(plugin.stub, *key).create(wanted[key])) for key in todo]
                )
            for key, (elapsed, answer) in zip(todo, timed, strict=True):
                if key[0] != MEMBER:  # a member's call also waits for its batch's window and turn
                    assert elapsed <= RERUN_BOUND_S * SLACK, (key, elapsed)
                if not isinstance(answer, Exception):
                    created[key] = (answer[0], answer[1])
        assert len(created) == len(wanted), (runs, sorted(set(wanted) - set(created)))
        assert fp.RESET_BEFORE in proxy.faults() and fp.RESET_AFTER in proxy.faults()

        # Exactly one of each object, nothing orphaned, the outputs of a clean run.
        assert _members(switch) == sorted(joins)
        copies = {vm.config.uuid: vm for vm in _copies(direct, gold.name)}
        assert len(copies) == len(copy_hosts), sorted(vm.name for vm in copies.values())
        for host in copy_hosts:
            id_, outs = created[(REPLICA, f"copy-{host}")]
            made = copies[id_]
            assert made.config.template and made.runtime.host.name == host
            assert outs == {**wanted[(REPLICA, f"copy-{host}")], "uuid": id_, "vm_name": made.name, "snapshot": "base"}
        for host in pvrdma_hosts:
            assert created[(PVRDMA, f"pvrdma-{host}")] == (f"pvrdma:{host}", _pvrdma_outputs(host))
            assert _pvrdma(direct, host) == ("vmk1", True)
        for host in joins:
            assert created[(MEMBER, f"member-{host}")][1] == wanted[(MEMBER, f"member-{host}")]
    finally:
        for host in pvrdma_hosts:
            _reset_pvrdma(direct, host)
