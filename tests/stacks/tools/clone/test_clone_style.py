"""`python -m stacks clone` keeps the source file's comments and YAML style, and says what it
derived (issue 25, item 6): a clone is the source with only its unique values changed, so a review
of `diff Pulumi.dev.yaml Pulumi.qa.yaml` shows exactly those and nothing else."""

from __future__ import annotations

import difflib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stacks.environment.loader import load_environment, read_stack_file
from tests.stack_fixtures import fixture_stack

PROJECT = Path(__file__).resolve().parents[4]
SHIPPED = ("dev", "staging", "prod")


def _project(tmp_path: Path) -> Path:
    for stack in SHIPPED:
        shutil.copy(fixture_stack(stack), tmp_path / f"Pulumi.{stack}.yaml")
    return tmp_path


def _clone(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stacks", "clone", *args, "--dir", str(project)],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _hosts(source: str) -> list[str]:
    names = re.findall(r"- (?:\{)?name: (esxi-[\w.-]+)", (fixture_stack(source)).read_text())
    return [arg for i, old in enumerate(names) for arg in ("--host-map", f"{old}=esxi-new-{i:02d}.example.com")]


def _body(text: str) -> list[str]:
    """The file without the clone's own header comment."""
    lines = text.splitlines(keepends=True)
    return lines[next(i for i, line in enumerate(lines) if "python -m stacks plan" in line) + 1 :]


CLONES = {
    "dev": ["dev", "qa", "--vlan", "177", "--rdma-subnet", "192.168.50.0/24", "--mgmt-subnet", "10.50.0.0/24"],
    "staging": [
        "staging",
        "perf",
        "--vlan",
        "178",
        "--rdma-subnet",
        "192.168.51.0/24",
        "--mgmt-subnet",
        "10.51.0.0/24",
    ],
}


@pytest.mark.parametrize("source", sorted(CLONES))
def test_the_clone_is_its_source_with_only_derived_values_changed(tmp_path: Path, source: str) -> None:
    project = _project(tmp_path)
    args = CLONES[source]
    result = _clone(project, *args, *_hosts(source))
    assert result.returncode == 0, result.stderr
    src_text = (project / f"Pulumi.{source}.yaml").read_text()
    new_text = (project / f"Pulumi.{args[1]}.yaml").read_text()
    load_environment(read_stack_file(project / f"Pulumi.{args[1]}.yaml"))  # and it is valid
    # Every comment of the source is still there, in order.
    comments = [line.strip() for line in src_text.splitlines() if line.strip().startswith("#")]
    assert [c for c in (line.strip() for line in _body(new_text)) if c in comments] == comments
    # Every line that differs carries a value the clone derived, as its stdout lists it.
    derived = re.findall(r"^  \S+: .* -> (.*)$", result.stdout, re.MULTILINE)
    assert derived, result.stdout
    changed = [
        line
        for line in difflib.ndiff(src_text.splitlines(), "".join(_body(new_text)).splitlines())
        if line.startswith("+ ")
    ]
    assert changed and all(any(value in line for value in derived) for line in changed), "\n".join(changed)


def test_flow_style_and_quotes_survive(tmp_path: Path) -> None:
    project = _project(tmp_path)
    result = _clone(project, *CLONES["dev"], *_hosts("dev"))
    assert result.returncode == 0, result.stderr
    text = (project / "Pulumi.qa.yaml").read_text()
    assert (
        "        - {name: worker-1, managementIp: 10.50.0.51, rdmaIp: 192.168.50.51, host: esxi-new-00.example.com}\n"
        in text
    )
    assert '  vsphere:allowUnverifiedSsl: "true"\n' in text


def test_it_says_what_it_derived_dns_servers_included(tmp_path: Path) -> None:
    project = _project(tmp_path)
    result = _clone(project, *CLONES["dev"], *_hosts("dev"))
    assert result.returncode == 0, result.stderr
    assert "derived from Pulumi.dev.yaml (31 values changed; everything else is dev's):" in result.stdout
    assert "  managementNetwork.dnsServers[0]: 10.10.0.2 -> 10.50.0.2\n" in result.stdout
    assert "  name: dev -> qa\n" in result.stdout


def test_a_dns_server_outside_the_old_subnet_is_kept_and_said_so(tmp_path: Path) -> None:
    project = _project(tmp_path)
    dev = project / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("dnsServers: [10.10.0.2]", "dnsServers: [10.10.0.2, 172.16.0.53]"))
    assert "172.16.0.53" in dev.read_text()
    result = _clone(project, *CLONES["dev"], *_hosts("dev"))
    assert result.returncode == 0, result.stderr
    assert "dnsServers: [10.50.0.2, 172.16.0.53]" in (project / "Pulumi.qa.yaml").read_text()
    assert (
        "note: managementNetwork.dnsServers[1] 172.16.0.53 kept: it is outside dev's management subnet "
        "10.10.0.0/24 (a shared resolver?); check that 10.50.0.0/24 can reach it"
    ) in result.stdout


def test_the_docs_say_what_the_clone_does_with_comments() -> None:
    """docs/environments.md once said the clone drops the source's comments; it keeps them (the
    test above). The sentence about them must say so."""
    doc = " ".join((PROJECT / "docs" / "environments.md").read_text().split())
    [sentence] = re.findall(r"YAML comments of the source [^.]*\.", doc)
    assert "are kept" in sentence and "not carried over" not in sentence, sentence
