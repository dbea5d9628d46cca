"""Issue 44: the minimum Pulumi CLI (3.151.0, pulumi/pulumi PR 18509), in Pulumi.yaml for CLIs that
read `requiredPulumiVersion` (3.219 and later) and asked by the program where the CLI answers
(3.217 and later); issue 51: every CLI before that runs the program, against an engine served as
each release serves it (cli_engine.py); and the plugin's virtualenv is named with the tool that
made it (`toolchain: pip`)."""

from __future__ import annotations

import pulumi
import pytest
import yaml
from pulumi.runtime import settings

from stacks import PROJECT_DIR
from stacks.wiring import cli_version
from tests.program import cli_engine


def test_pulumi_yaml_requires_the_minimum_cli() -> None:
    project = yaml.safe_load((PROJECT_DIR / "Pulumi.yaml").read_text())
    assert project["requiredPulumiVersion"] == cli_version.REQUIRED_RANGE == ">=3.151.0"


def test_the_plugin_names_its_toolchain() -> None:
    plugin = yaml.safe_load((PROJECT_DIR / "provider" / "PulumiPlugin.yaml").read_text())
    assert plugin["runtime"]["options"] == {"toolchain": "pip", "virtualenv": "../.venv"}


def test_the_program_asks_the_engine_before_registering_anything() -> None:
    assert "require_minimum_cli()" in (PROJECT_DIR / "__main__.py").read_text().split("env = ")[0]


@pytest.mark.parametrize("version", ["3.151.0", "3.200.0", "3.215.3", "3.216.0", "3.216.1"])
def test_a_cli_that_cannot_be_asked_runs_the_program(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    """Issue 51 item 4: before 3.217 the engine has no `RequirePulumiVersion` (3.216 calls it
    `CheckPulumiVersion`): UNIMPLEMENTED says nothing about 3.151, so the program runs."""
    engine = cli_engine.CliEngine(version)
    with cli_engine.serving(engine) as stub:
        monkeypatch.setattr(settings, "get_engine", lambda: stub)
        cli_version.require_minimum_cli()

    assert engine.asked == []  # nothing answered: 3.216's CheckPulumiVersion was not the name asked
    assert engine.logged == [
        "the Pulumi CLI predates 3.217.0 and cannot be asked its version; this project needs 3.151.0 or later "
        "(docs/deploy.md)"
    ]


@pytest.mark.parametrize("version", ["3.217.0", "3.219.0", "3.272.0"])
def test_a_cli_that_answers_is_asked_the_range(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    engine = cli_engine.CliEngine(version)
    with cli_engine.serving(engine) as stub:
        monkeypatch.setattr(settings, "get_engine", lambda: stub)
        cli_version.require_minimum_cli()

    assert engine.asked == [("RequirePulumiVersion", ">=3.151.0")]


def test_a_raised_floor_is_refused_by_the_cli_that_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_version, "MINIMUM_CLI", "3.230.0")
    monkeypatch.setattr(cli_version, "REQUIRED_RANGE", ">=3.230.0")
    engine = cli_engine.CliEngine("3.220.0")
    with cli_engine.serving(engine) as stub:
        monkeypatch.setattr(settings, "get_engine", lambda: stub)
        with pytest.raises(pulumi.RunError, match=r"needs Pulumi CLI 3\.230\.0 or later") as info:
            cli_version.require_minimum_cli()

    assert 'Pulumi CLI version 3.220.0 does not satisfy the version range ">=3.230.0"' in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("version", ["3.150.0", "3.216.0"])
def test_a_floor_past_the_ask_refuses_a_cli_that_cannot_answer(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    """Silence proves the CLI predates 3.217: a floor at or past it is enforced on that alone."""
    monkeypatch.setattr(cli_version, "MINIMUM_CLI", "3.217.0")
    monkeypatch.setattr(cli_version, "REQUIRED_RANGE", ">=3.217.0")
    with cli_engine.serving(cli_engine.CliEngine(version)) as stub:
        monkeypatch.setattr(settings, "get_engine", lambda: stub)
        with pytest.raises(pulumi.RunError, match=r"needs Pulumi CLI 3\.217\.0 or later .*predates 3\.217\.0"):
            cli_version.require_minimum_cli()


def test_the_test_engine_reads_ranges_as_blang_semver() -> None:
    assert cli_engine.satisfies("3.151.0", ">=3.151.0")
    assert not cli_engine.satisfies("3.150.9", ">=3.151.0")
    assert cli_engine.satisfies("3.7.8", ">=3.5.0 !3.7.7")
    assert not cli_engine.satisfies("3.7.7", ">=3.5.0 !3.7.7")
    assert cli_engine.satisfies("3.9.0", "<3.4.0 || >3.8.0")
    with pytest.raises(ValueError, match="plain comparators only"):
        cli_engine.satisfies("3.9.0", ">=3.x")


def test_under_the_mocks_there_is_nothing_to_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "get_engine", lambda: object())
    cli_version.require_minimum_cli()  # no RequirePulumiVersion: plan and the tests run on
