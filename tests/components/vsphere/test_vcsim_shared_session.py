"""Issue 51 item 5: operations that share one session share its pool of connections, and one
operation's deadline must not end another's call, nor drop the session the others use.

pyVmomi hands each request a connection from the session's pool and takes it back after the
answer (SoapAdapter.py, `SoapStubAdapter.GetConnection`/`ReturnConnection`), so a connection that
operation A used serves operation B next. Against the simulator behind the loopback fault proxy
(tests/provider/fault_proxy.py), which slows one answer down so that B's call is in flight when
A's deadline passes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from components.vcenter import session
from components.vcenter.errors import VsphereError
from components.vcenter.settings import VcenterConnection
from components.vsphere.provider_base import RetryPolicy
from components.vsphere.pvrdma_host import PvrdmaHostSettingsProvider
from tests.provider.fault_proxy import PASS, RESET_AFTER, TRICKLE, FaultProxy, on_method, wait_until

pytestmark = pytest.mark.vcsim

A_BOUND_S = 1.0
ONE_TRY = RetryPolicy(attempts=1, max_total=30.0)
"""B tries once: a retry would hide the call A's deadline broke."""


def _sessions(si: Any) -> set[str]:
    return {s.key for s in si.content.sessionManager.sessionList or []}


def _provider(conn: VcenterConnection, retry: RetryPolicy) -> PvrdmaHostSettingsProvider:
    provider = PvrdmaHostSettingsProvider(retry=retry)
    provider.use_connection(conn)
    return provider


@pytest.fixture
def proxied(vcsim: Any) -> Iterator[tuple[FaultProxy, VcenterConnection]]:
    session.disconnect_all()
    proxy = FaultProxy(upstream_port=vcsim.port, trickle_interval_s=0.004)
    conn = VcenterConnection(
        server="127.0.0.1", user=vcsim.user, password=vcsim.password, port=proxy.port, protocol="http"
    )
    yield proxy, conn
    session.disconnect_all()
    proxy.close()


def test_one_operations_deadline_ends_neither_anothers_call_nor_the_shared_session(
    proxied: tuple[FaultProxy, VcenterConnection], si: Any
) -> None:
    """A calls vCenter, then works on past its 1 s bound; B takes the connection A used and waits
    about 2 s for a trickled answer. Old code: A's deadline shut B's socket at 1 s (B failed), and
    A's DeadlineExceeded dropped the shared session, so the next operation logged in again."""
    proxy, conn = proxied
    proxy.rule = on_method("CurrentTime", TRICKLE)  # B's call: its answer a byte every 4 ms
    before = _sessions(si)
    a_called, b_sent = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def operation_a(service: Any) -> None:
        service.RetrieveContent()
        a_called.set()
        b_sent.wait(5)
        time.sleep(A_BOUND_S + 0.3)  # still inside A's operation when its deadline passes
        service.RetrieveContent()  # past the deadline: refused before it is sent

    def run_a() -> None:
        try:
            _provider(conn, RetryPolicy(attempts=3, base_delay=0.01, max_total=A_BOUND_S)).run(operation_a, what="A")
        except VsphereError as exc:
            outcome["a"] = exc
            outcome["a_ended"] = time.monotonic()

    def operation_b(service: Any) -> Any:
        b_sent.set()
        return service.CurrentTime()

    a = threading.Thread(target=run_a)
    a.start()
    assert a_called.wait(10)
    b_started = time.monotonic()
    answer = _provider(conn, ONE_TRY).run(operation_b, what="B")  # old code: VsphereError at ~1 s
    b_took = time.monotonic() - b_started
    a.join(10)

    assert answer is not None
    assert "bound" in str(outcome["a"]), outcome["a"]
    assert outcome["a_ended"] - b_started < b_took, "A's deadline passed while B's call ran"
    assert proxy.faults() == [TRICKLE]
    # One login for A and B, still cached: A's deadline dropped no session.
    shared = session._CACHE.get(conn)
    assert shared is not None and len(_sessions(si) - before) == 1
    seen = _provider(conn, ONE_TRY).run(lambda service: service, what="C")
    assert seen is shared


def test_a_connection_back_in_the_pool_is_not_shut_by_the_deadline_of_its_last_user(
    proxied: tuple[FaultProxy, VcenterConnection],
) -> None:
    """A's connection waits in the pool when A's deadline passes; B takes it next. Old code: A's
    deadline shut that idle socket, and B's request met a broken pipe."""
    _, conn = proxied

    def operation_a(service: Any) -> None:
        service.RetrieveContent()
        time.sleep(A_BOUND_S + 0.3)  # its connection idle in the pool meanwhile

    _provider(conn, RetryPolicy(attempts=1, max_total=A_BOUND_S)).run(operation_a, what="A")

    assert _provider(conn, ONE_TRY).run(lambda service: service.CurrentTime(), what="B") is not None


def test_a_session_dropped_after_a_reset_is_logged_out(proxied: tuple[FaultProxy, VcenterConnection], si: Any) -> None:
    """Old code: the dropped session stayed on vCenter until its idle timeout, one per hiccup."""
    proxy, conn = proxied
    before = _sessions(si)
    provider = _provider(conn, RetryPolicy(base_delay=0.01, max_delay=0.02, max_total=20.0))
    provider.run(lambda service: service.CurrentTime(), what="login")
    first = _sessions(si) - before
    proxy.rule = on_method("CurrentTime", RESET_AFTER, then=PASS)

    provider.run(lambda service: service.CurrentTime(), what="after a reset")

    assert proxy.faults() == [RESET_AFTER]
    assert len(first) == 1
    assert wait_until(lambda: len(_sessions(si) - before) == 1 and not first & _sessions(si), 5), (
        f"sessions left: {_sessions(si) - before} (the first was {first})"
    )
