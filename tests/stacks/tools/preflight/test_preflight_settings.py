"""Where preflight finds the vCenter settings (issue 18 item 1): the README stores the password as
a Pulumi secret, and preflight must read it the way Pulumi does, through the CLI, then fall back to
the environment, and say which sources it tried.

The CLI is a stand-in (tests/stacks/tools/preflight/standin/pulumi) that prints `pulumi config --json
--show-secrets` exactly as pulumi/pulumi's `listConfig` does and fails the way the real one does
(no such stack, no passphrase, wrong passphrase, outside a project)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacks.cli import main
from stacks.tools.preflight import command as preflight
from stacks.tools.preflight.settings import read_cli_config

from .conftest import TEMPLATE, Planted
from .test_preflight_vcsim import BASE

STANDIN = Path(__file__).resolve().parent / "standin" / "pulumi"
ENV = "vsphere-gpu-cluster:environment"
CIPHERTEXT = "v1:Zm9vYmFyYmF6:cXV1eA=="
PASSPHRASE = "correct horse"
CLI = "`pulumi config --json --show-secrets --stack sim`"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """project(config, stacks=...) -> a project folder with Pulumi.sim.yaml, the stand-in CLI on PATH."""
    for name in ("VSPHERE_SERVER", "VSPHERE_USER", "VSPHERE_PASSWORD", "PULUMI_CONFIG_PASSPHRASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE_FILE", raising=False)

    def make(config: dict[str, Any], *, stacks: dict[str, dict[str, str]] | None = None, cli: bool = True) -> Path:
        folder = tmp_path / "project"
        folder.mkdir(exist_ok=True)
        (folder / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "vsphere-gpu-cluster", "runtime": "python"}))
        (folder / "Pulumi.sim.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        if cli:
            script = STANDIN.read_text().split("\n", 1)[1]
            target = bin_dir / "pulumi"
            target.write_text(f"#!{sys.executable}\n{script}")
            target.chmod(0o755)
            backend = {"passphrase": PASSPHRASE, "stacks": stacks if stacks is not None else {"sim": {}}}
            (bin_dir / "backend.json").write_text(json.dumps(backend))
        monkeypatch.setenv("PATH", str(bin_dir))
        monkeypatch.setattr(preflight, "PROJECT_DIR", folder)
        return folder

    return make


def _config(planted: Planted, **extra: Any) -> dict[str, Any]:
    return {
        "vsphere:vsphereServer": planted.sim.server,
        "vsphere:user": planted.sim.user,
        "vsphere:password": {"secure": CIPHERTEXT},
        ENV: BASE,
        **extra,
    }


@pytest.mark.vcsim
def test_the_password_stored_as_a_pulumi_secret_is_read_through_the_cli(
    project: Callable[..., Path],
    planted: Planted,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project(_config(planted), stacks={"sim": {CIPHERTEXT: planted.sim.password}})
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)

    code = main(["preflight", "sim"])

    out = capsys.readouterr().out.splitlines()
    assert code == 0, "\n".join(out)
    assert out[0] == (
        "connection settings: vsphere:vsphereServer from pulumi config --stack sim, vsphere:user from pulumi config "
        "--stack sim, vsphere:password from pulumi config --stack sim"
    )
    assert f"OK      {ENV}.vcenter.template: template '{TEMPLATE}' exists" in out


@pytest.mark.vcsim
def test_without_the_passphrase_the_environment_password_is_used(
    project: Callable[..., Path],
    planted: Planted,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project(_config(planted), stacks={"sim": {CIPHERTEXT: "not-it"}})
    monkeypatch.setenv("VSPHERE_PASSWORD", planted.sim.password)

    code = main(["preflight", "sim"])

    out = capsys.readouterr().out.splitlines()
    assert code == 0, "\n".join(out)
    assert out[0] == (
        "connection settings: vsphere:vsphereServer from Pulumi.sim.yaml, vsphere:user from Pulumi.sim.yaml, "
        "vsphere:password from environment VSPHERE_PASSWORD"
    )


def test_a_missing_passphrase_is_reported_with_every_source_tried(
    project: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    project(
        {"vsphere:vsphereServer": "vc.lab", "vsphere:user": "u", "vsphere:password": {"secure": CIPHERTEXT}, ENV: BASE}
    )

    assert main(["preflight", "sim"]) == 2

    err = capsys.readouterr().err
    assert (
        f"vsphere:password not found; tried, in order: --password: not given; {CLI}: failed: passphrase must be set "
        "with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE environment variables; Pulumi.sim.yaml: "
        "holds it as a secret, which only the Pulumi CLI can decrypt; environment VSPHERE_PASSWORD: not set"
    ) in err
    assert "vsphere:vsphereServer not found" not in err and "Traceback" not in err


def test_a_stack_the_backend_does_not_have_is_reported(
    project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project({"vsphere:password": {"secure": CIPHERTEXT}, ENV: BASE}, stacks={"other": {}})
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)

    assert main(["preflight", "sim"]) == 2

    err = capsys.readouterr().err
    assert f"{CLI}: failed: no stack named 'sim' found" in err
    assert "vsphere:vsphereServer not found" in err


def test_a_wrong_passphrase_is_reported(
    project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project(
        {"vsphere:vsphereServer": "vc.lab", "vsphere:user": "u", "vsphere:password": {"secure": CIPHERTEXT}, ENV: BASE}
    )
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "wrong")

    assert main(["preflight", "sim"]) == 2

    assert f"{CLI}: failed: incorrect passphrase, please set PULUMI_CONFIG_PASSPHRASE" in capsys.readouterr().err


def test_without_the_cli_it_says_so(project: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    project(
        {"vsphere:vsphereServer": "vc.lab", "vsphere:user": "u", "vsphere:password": {"secure": CIPHERTEXT}, ENV: BASE},
        cli=False,
    )

    assert main(["preflight", "sim"]) == 2

    assert f"{CLI}: not run, the Pulumi CLI is not on PATH" in capsys.readouterr().err


def test_cli_output_is_read_as_pulumi_prints_it(project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    folder = project(
        {
            "vsphere:vsphereServer": "vc.lab",
            "vsphere:allowUnverifiedSsl": "true",
            "vsphere:password": {"secure": CIPHERTEXT},
            ENV: BASE,
        },
        stacks={"sim": {CIPHERTEXT: "p<&>w"}},
    )
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)

    values, note = read_cli_config("sim", project_dir=folder, environ=dict(os.environ))

    assert note == f"{CLI}: read"
    assert values == {
        "vsphere:vsphereServer": "vc.lab",
        "vsphere:allowUnverifiedSsl": "true",
        "vsphere:password": "p<&>w",
    }


def test_the_fix_for_a_missing_account_is_the_one_validate_accepts(
    project: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 54 item 4: the advice was `pulumi config set vsphere:user ...`, which `validate` then
    refuses (a stack file holds no vCenter credentials: stacks/environment/loader.py CREDENTIAL_KEYS)."""
    project({"vsphere:vsphereServer": "vc.lab", ENV: BASE}, cli=False)

    assert main(["preflight", "sim"]) == 2

    err = capsys.readouterr().err
    fix = next(line for line in err.splitlines() if line.startswith("Fix:"))
    assert "vsphere:user" not in fix and "vsphere:password" not in fix
    assert "export VSPHERE_USER=... VSPHERE_PASSWORD=..." in fix
