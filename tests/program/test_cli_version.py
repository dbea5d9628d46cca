"""Issue 44: the minimum Pulumi CLI (3.151.0, pulumi/pulumi PR 18509) is enforced, in Pulumi.yaml for
CLIs that read `requiredPulumiVersion` and by the program for the ones before them; and the
plugin's virtualenv is named with the tool that made it (`toolchain: pip`)."""

from __future__ import annotations

from typing import Any

import grpc
import pulumi
import pytest
import yaml
from pulumi.runtime import settings

from stacks import PROJECT_DIR
from stacks.wiring import cli_version


def test_pulumi_yaml_requires_the_minimum_cli() -> None:
    project = yaml.safe_load((PROJECT_DIR / "Pulumi.yaml").read_text())
    assert project["requiredPulumiVersion"] == cli_version.REQUIRED_RANGE == ">=3.151.0"


def test_the_plugin_names_its_toolchain() -> None:
    plugin = yaml.safe_load((PROJECT_DIR / "provider" / "PulumiPlugin.yaml").read_text())
    assert plugin["runtime"]["options"] == {"toolchain": "pip", "virtualenv": "../.venv"}


def test_the_program_asks_the_engine_before_registering_anything() -> None:
    assert "require_minimum_cli()" in (PROJECT_DIR / "__main__.py").read_text().split("env = ")[0]


class _RpcError(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNKNOWN

    def details(self) -> str:
        return 'Pulumi CLI version 3.150.0 does not satisfy the version range ">=3.151.0"'


class _OldEngine:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def RequirePulumiVersion(self, request: Any) -> None:
        self.asked.append(request.pulumi_version_range)
        raise _RpcError()


def test_an_older_cli_fails_with_one_line_naming_the_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = _OldEngine()
    monkeypatch.setattr(settings, "get_engine", lambda: engine)

    with pytest.raises(pulumi.RunError, match=r"needs Pulumi CLI 3\.151\.0 or later") as info:
        cli_version.require_minimum_cli()

    assert engine.asked == [">=3.151.0"]
    assert "\n" not in str(info.value)


def test_under_the_mocks_there_is_nothing_to_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "get_engine", lambda: object())
    cli_version.require_minimum_cli()  # no RequirePulumiVersion: plan and the tests run on
