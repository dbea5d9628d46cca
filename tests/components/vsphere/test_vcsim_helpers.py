"""vCenter I/O (components.vcenter) against the simulator: lookups, tasks, sessions that are
bounded in time and logged out, and a vCenter that accepts a connection and never answers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pyVmomi import vim

from components.vcenter import lookups, session
from components.vcenter.errors import VsphereError
from components.vcenter.settings import VcenterConnection
from components.vcenter.tasks import wait_for_task
from components.vsphere.provider_base import RetryPolicy
from components.vsphere.pvrdma_host import PvrdmaHostSettingsProvider

pytestmark = pytest.mark.vcsim


class SilentVcenter:
    """A loopback listener that accepts every connection and never answers (a hung vCenter)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.accepted.append(conn)  # kept open, never read, never answered

    def connection(self) -> VcenterConnection:
        return VcenterConnection(server="127.0.0.1", user="u", password="p", port=self.port, protocol="http")

    def close(self) -> None:
        self.server.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent() -> Iterator[SilentVcenter]:
    listener = SilentVcenter()
    yield listener
    listener.close()


def _in_thread(fn: Callable[[], Any], wait: float) -> tuple[bool, Any, float]:
    """(finished within `wait`, result or exception, seconds taken). A hung call stays behind as
    a daemon thread, so a test of a hang fails instead of hanging the suite."""
    box: list[Any] = []
    start = time.monotonic()

    def target() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(wait)
    return not thread.is_alive(), (box[0] if box else None), time.monotonic() - start


def _sessions(si: Any) -> set[str]:
    return {s.key for s in si.content.sessionManager.sessionList or []}


def test_find_helpers(vcsim: Any, si: Any, find: Callable[[Any, str], Any]) -> None:
    assert lookups.find_host(si, "DC0_C0_H1")._moId == find(vim.HostSystem, "DC0_C0_H1")._moId
    assert lookups.find_host_or_none(si, "nope") is None
    vm = find(vim.VirtualMachine, "DC0_H0_VM0")
    assert lookups.find_vm(si, "DC0_H0_VM0")._moId == vm._moId
    assert lookups.find_vm_by_uuid(si, vm.config.uuid)._moId == vm._moId
    assert lookups.find_vm_by_uuid(si, "00000000-0000-0000-0000-000000000000") is None


def test_wait_for_task_reraises_the_fault_text_and_object(fresh_vm: Any) -> None:
    wait_for_task(fresh_vm.PowerOffVM_Task())
    task = fresh_vm.PowerOffVM_Task()  # already off: the task fails

    with pytest.raises(VsphereError) as info:
        wait_for_task(task, object_name="worker-1", what="power off")

    assert str(info.value).startswith("power off on worker-1 failed: InvalidPowerState")
    assert info.value.object_name == "worker-1"
    assert isinstance(info.value.fault, vim.fault.InvalidPowerState)
    assert not info.value.transient


def test_login_to_a_vcenter_that_never_answers_fails_within_the_bound(silent: SilentVcenter) -> None:
    finished, result, took = _in_thread(lambda: session.login(silent.connection(), timeout=1.0), wait=15)

    assert finished, "login to a silent vCenter still waiting after 15 s"
    assert isinstance(result, VsphereError), result
    assert f"http://127.0.0.1:{silent.port}" in str(result)
    assert "did not answer within 1s" in str(result)
    assert result.transient
    assert took < 5


def test_a_silent_vcenter_does_not_hold_up_logins_to_another(vcsim: Any, silent: SilentVcenter) -> None:
    stuck = threading.Thread(target=lambda: _in_thread(lambda: session.connect(silent.connection(), timeout=5), 10))
    stuck.start()
    time.sleep(0.3)  # the silent login is under way (and, before, held the process-wide lock)
    good = VcenterConnection.from_url(vcsim.url)
    try:
        finished, result, _ = _in_thread(lambda: session.connect(good), wait=4)
        assert finished, "a login to a healthy vCenter waited on the silent one"
        assert not isinstance(result, BaseException), result
    finally:
        session.forget(good, logout_session=True)
        stuck.join()


def test_a_provider_operation_against_a_silent_vcenter_ends_by_its_deadline(silent: SilentVcenter) -> None:
    policy = RetryPolicy(attempts=10, base_delay=0.1, max_delay=0.2, max_total=3.0, login_timeout=1.0)
    provider = PvrdmaHostSettingsProvider(retry=policy)
    provider.use_connection(silent.connection())

    finished, result, took = _in_thread(
        lambda: provider.read("pvrdma:h", {"host_name": "h", "vmknic_device": "vmk1"}), wait=20
    )

    assert finished, "provider read still waiting on a silent vCenter after 20 s"
    assert isinstance(result, VsphereError), result
    assert f"127.0.0.1:{silent.port}" in str(result)
    assert "the operation's 3s bound" in str(result)
    assert took < policy.max_total + 1  # the operation's deadline ends a login in flight too (issue 43)


def test_operations_sharing_a_silent_vcenters_login_each_end_by_their_deadline(silent: SilentVcenter) -> None:
    """Shared sessions (issue 44): callers queued behind one login must not log in one after
    another, each past its deadline."""
    policy = RetryPolicy(attempts=10, base_delay=0.1, max_delay=0.2, max_total=3.0, login_timeout=1.0)
    provider = PvrdmaHostSettingsProvider(retry=policy)
    provider.use_connection(silent.connection())

    def read() -> tuple[bool, Any, float]:
        return _in_thread(lambda: provider.read("pvrdma:h", {"host_name": "h", "vmknic_device": "vmk1"}), wait=30)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: read(), range(8)))

    assert all(finished for finished, _, _ in results)
    assert all(isinstance(result, VsphereError) for _, result, _ in results)
    assert max(took for _, _, took in results) < policy.max_total + policy.login_timeout + 2


def test_provider_operations_share_one_session_logged_out_at_exit(vcsim: Any, si: Any, host_name: str) -> None:
    """Issue 44: 640 operations at once must not be 640 logins; the shared session is logged out
    by `disconnect_all` (at interpreter exit). Old code: a login per operation, three keys."""
    session.disconnect_all()
    provider = PvrdmaHostSettingsProvider()
    provider.use_connection(VcenterConnection.from_url(vcsim.url))
    before = _sessions(si)
    seen: list[str] = []

    def op(service: Any) -> str:
        seen.append(service.content.sessionManager.currentSession.key)
        return str(lookups.find_host(service, host_name).name)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: provider.run(op, what="find host"), range(16)))

    assert len(set(seen)) == 1, f"{len(set(seen))} sessions for 16 operations"
    assert len(_sessions(si) - before) == 1
    session.disconnect_all()
    assert _sessions(si) == before


def test_an_expired_session_is_renewed_within_the_operation(vcsim: Any, si: Any, host_name: str) -> None:
    session.disconnect_all()
    provider = PvrdmaHostSettingsProvider(retry=RetryPolicy(base_delay=0.01, max_delay=0.02))
    provider.use_connection(VcenterConnection.from_url(vcsim.url))
    before = _sessions(si)
    seen: list[str] = []

    def op(service: Any) -> str:
        seen.append(service.content.sessionManager.currentSession.key)
        if len(seen) == 1:
            service.content.sessionManager.Logout()  # vCenter restarted / idle timeout
        return str(lookups.find_host(service, host_name).name)  # NotAuthenticated the first time

    assert provider.run(op, what="find host") == host_name
    assert len(seen) == 2 and seen[0] != seen[1]
    # The next operation uses the renewed session, not a third login.
    assert provider.run(op, what="find host") == host_name and seen[2] == seen[1]
    session.disconnect_all()
    assert _sessions(si) == before


def test_cached_sessions_are_logged_out_by_disconnect_all(vcsim: Any, si: Any) -> None:
    conn = VcenterConnection.from_url(vcsim.url)
    # Sessions an earlier test's operations left in the cache (shared since issue 44) go first, or
    # disconnect_all would log them out too and `before` would name sessions that are gone.
    session.disconnect_all()
    before = _sessions(si)
    first = session.connect(conn)
    assert session.connect(conn) is first
    assert len(_sessions(si) - before) == 1

    session.disconnect_all()

    assert _sessions(si) == before


def test_wrong_password_fails_at_once_with_the_user(vcsim: Any) -> None:
    good = VcenterConnection.from_url(vcsim.url)
    bad = VcenterConnection(server=good.server, user="nobody", password="wrong", port=good.port, protocol="http")
    provider = PvrdmaHostSettingsProvider()
    provider.use_connection(bad)
    with pytest.raises(VsphereError, match=r"refused the login of user 'nobody'") as info:
        provider.read("pvrdma:x", {"host_name": "x", "vmknic_device": "vmk1"})
    assert isinstance(info.value.fault, vim.fault.InvalidLogin)


def test_tls_failure_is_lasting_and_names_the_fix(vcsim: Any) -> None:
    plain = VcenterConnection.from_url(vcsim.url)  # the simulator speaks plain HTTP
    tls = VcenterConnection(server=plain.server, user="u", password="p", port=plain.port, protocol="https")

    with pytest.raises(
        VsphereError, match=r"TLS with vCenter https://127\.0\.0\.1:\d+ failed: .*allowUnverifiedSsl"
    ) as info:
        session.login(tls, timeout=5)

    assert not info.value.transient
