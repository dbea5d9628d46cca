"""What preflight's mirror check makes of each answer (stacks.tools.preflight.checks.mirror), the
servers' side replaced by the answer alone: what it asks (scheme, host, path, trust) and the
finding each answer gives. test_preflight_mirror.py asks a real registry and file server."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, load_environment
from stacks.tools.preflight.checks.mirror import Answer, check_mirror
from stacks.tools.preflight.checks.report import Report
from tests.stack_fixtures import fixture_view

KEY = f"{ENVIRONMENT_KEY}.mirror"


def _findings(mirror: dict[str, Any], answer: Answer) -> tuple[list[tuple[str, str, str, str | None]], list[str]]:
    view = fixture_view("dev")
    values = copy.deepcopy(dict(view.values))
    values[ENVIRONMENT_KEY]["mirror"] = mirror
    env = load_environment(ConfigView(values=values, secret_keys=view.secret_keys))
    asked: list[tuple[str, str, str, str | None]] = []

    def fetch(scheme: str, netloc: str, path: str, ca: str | None) -> Answer:
        asked.append((scheme, netloc, path, ca))
        return answer

    report = Report()
    check_mirror(env, report, fetch)
    return asked, [f"{f.level} {f.key}: {f.message}" for f in report.findings]


def test_plain_http_asks_over_http_for_the_sandbox_image() -> None:
    asked, found = _findings({"registry": "registry.lab.example:5000/g", "plainHttp": True}, Answer(status=200))
    [(scheme, netloc, path, ca)] = asked
    assert (scheme, netloc, ca) == ("http", "registry.lab.example:5000", None)
    assert path.startswith("/v2/g/pause/manifests/3.")
    assert found == [f"OK {KEY}.registry: the registry registry.lab.example:5000 answers over plain HTTP and has "
                     f"registry.lab.example:5000/g/pause:{path.rsplit('/', 1)[1]}"]  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (Answer(unreachable="timed out"), f"WARN {KEY}.registry: the registry registry.lab.example does not answer "
                                          "from here (timed out); the nodes must reach it over HTTPS"),
        (Answer(status=401), f"WARN {KEY}.registry: the registry registry.lab.example answers but asks for "
                             "credentials (HTTP 401); preflight holds none"),
        (Answer(status=500), f"WARN {KEY}.registry: the registry registry.lab.example answered HTTP 500 for /v2/"),
        (Answer(untrusted="self-signed certificate in certificate chain"),
         f"BLOCKER {KEY}.caBundle: the registry registry.lab.example presents a certificate the system CAs (no "
         "mirror.caBundle) do not verify (self-signed certificate in certificate chain)"),
    ],
)  # fmt: skip
def test_each_answer_of_the_registry(answer: Answer, expected: str) -> None:
    _, [found] = _findings({"registry": "registry.lab.example"}, answer)
    assert found.startswith(expected)
