"""Issue 52: the plugin's shared vCenter session keeps a connection for every call its operation
pool makes at once. pyVmomi's stub keeps `poolSize` idle connections and closes the rest as they
come back (pyVmomi/SoapAdapter.py, `ReturnConnection`); with its default of 5, 640 operations at
once opened a new connection, over HTTPS a new TLS handshake, for almost every call."""

from __future__ import annotations

from typing import Any

import pytest

from components.gpucluster_resource import DEFAULT_MAX_CONCURRENT_OPERATIONS
from components.vcenter import session
from components.vcenter.settings import VcenterConnection
from components.vsphere.pvrdma_host import PvrdmaHostSettingsProvider

pytestmark = pytest.mark.vcsim


def test_the_soap_pool_is_the_operation_pool() -> None:
    assert session.SOAP_POOL_SIZE == DEFAULT_MAX_CONCURRENT_OPERATIONS


def test_connections_of_concurrent_calls_all_stay_in_the_sessions_pool(vcsim: Any) -> None:
    session.disconnect_all()
    provider = PvrdmaHostSettingsProvider()
    provider.use_connection(VcenterConnection.from_url(vcsim.url))
    stub = provider.run(lambda si: si._stub, what="the session's SOAP stub")
    taken = [stub.GetConnection() for _ in range(16)]  # 16 calls in flight at once
    for connection in taken:
        stub.ReturnConnection(connection)
    try:
        assert len(stub.pool) == 16, f"{len(stub.pool)} of 16 connections kept for the next calls"
    finally:
        session.disconnect_all()
