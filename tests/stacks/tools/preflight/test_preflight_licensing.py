"""The vGPU license service in preflight (issue 42): `mirror.licenseServer`, probed over TCP from
this machine: a real listener on loopback answers, a closed loopback port does not; an air-gapped
stack (a mirror) without the key is told where its licenses come from."""

from __future__ import annotations

import copy
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stacks.environment.loader import ENVIRONMENT_KEY, load_environment, read_stack_file
from stacks.environment.model import Environment
from stacks.tools.preflight.checks.licensing import check_licensing, license_server_address
from stacks.tools.preflight.checks.report import Report

FIXTURE = Path(__file__).parents[1] / "images" / "fixtures" / "Pulumi.dev.yaml"
KEY = f"{ENVIRONMENT_KEY}.mirror.licenseServer"


def _env(**mirror: Any) -> Environment:
    view = read_stack_file(FIXTURE)
    values = copy.deepcopy(dict(view.values))
    if mirror:
        values[ENVIRONMENT_KEY]["mirror"] = mirror
    return load_environment(type(view)(values=values, secret_keys=view.secret_keys))


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as server:
        return int(server.getsockname()[1])


def _findings(env: Environment) -> list[tuple[str, str, str]]:
    report = Report()
    check_licensing(env, report)
    return [(f.level, f.key, f.message) for f in report.findings]


def test_a_license_service_that_answers_is_ok(listener: int) -> None:
    [(level, key, message)] = _findings(_env(registry="r.site.example:5000/x", licenseServer=f"127.0.0.1:{listener}"))
    assert (level, key) == ("OK", KEY)
    assert f"127.0.0.1:{listener} answers" in message


def test_a_license_service_that_does_not_answer_is_named() -> None:
    port = _closed_port()
    [(level, key, message)] = _findings(_env(registry="r.site.example:5000/x", licenseServer=f"127.0.0.1:{port}"))
    assert (level, key) == ("WARN", KEY)
    assert f"127.0.0.1:{port} does not answer from here" in message


def test_an_air_gapped_stack_without_one_is_told_where_licenses_come_from() -> None:
    [(level, key, message)] = _findings(_env(registry="r.site.example:5000/x"))
    assert (level, key) == ("WARN", KEY)
    assert "DLS" in message
    assert _findings(_env()) == []  # a connected stack: NVIDIA's cloud service, nothing to check


@pytest.mark.parametrize(
    ("value", "address"),
    [("dls.site.example", ("dls.site.example", 443)), ("10.0.0.5:8443", ("10.0.0.5", 8443)), ("[fd00::5]", ("fd00::5", 443))],
)
def test_the_address_defaults_to_https(value: str, address: tuple[str, int]) -> None:
    assert license_server_address(value) == address


def test_a_bad_address_is_refused_by_key() -> None:
    from stacks.environment.loader import InvalidEnvironment

    with pytest.raises(InvalidEnvironment) as raised:
        _env(registry="r.site.example:5000/x", licenseServer="https://dls.site.example")
    assert any(p.startswith(f"{KEY}: ") and "host[:port]" in p for p in raised.value.problems)
