"""The vGPU license service: every node's vGPU licenses itself from an NVIDIA License System
instance (NVIDIA vGPU licensing user guide: a guest without a license runs degraded, then stops
its CUDA work). Air-gapped, that is a DLS appliance inside the site (`mirror.licenseServer`).
Preflight checks that the address answers on TCP from this machine; the guests must reach it too,
which only they can prove (docs/air-gapped.md)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from stacks.environment.model import Environment
from stacks.tools.preflight.checks.report import Report

DLS_PORT = 443
"""The DLS appliance serves its licensing API over HTTPS."""

Probe = Callable[[str, int], str | None]
"""(host, port) -> None when it answers, else why not."""


def license_server_address(value: str) -> tuple[str, int]:
    """`host[:port]` (IPv6 in brackets) -> (host, port), port 443 when left out."""
    parts = urlsplit("//" + value)
    return parts.hostname or value, parts.port or DLS_PORT


def tcp_probe(host: str, port: int, *, timeout: float = 5.0) -> str | None:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as error:
        return str(error) or type(error).__name__


def check_licensing(env: Environment, report: Report, probe: Probe = tcp_probe) -> None:
    server = env.mirror.license_server
    key = ("mirror", "licenseServer")
    if server is None:
        if env.mirror.registry is not None:
            report.warn(
                key,
                "not set: the vGPU guests license from an NVIDIA License System instance, which an air-gapped "
                "site runs itself (a DLS appliance); set it to that instance's host[:port] to have it checked",
            )
        return
    host, port = license_server_address(server)
    failed = probe(host, port)
    if failed is None:
        report.ok(key, f"the license service {host}:{port} answers from here (the guests must reach it too)")
    else:
        report.warn(key, f"the license service {host}:{port} does not answer from here ({failed}); the guests "
                    "must reach it, or their vGPUs stay unlicensed")  # fmt: skip
