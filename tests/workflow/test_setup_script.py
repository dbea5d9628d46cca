"""scripts/setup.sh sets up by role (issue 55 item 5) and says what it is doing (issue 45).

- `setup.sh` installs what a user runs the project with (the virtualenv of requirements-cli.txt,
  Graphviz, skopeo, the simulator); `setup.sh --test` the test bench on top (the real programs
  of docs/tests.md, requirements-dev.txt), and scripts/test.sh runs that first, so CI's
  `setup.sh` then `test.sh` still sets up everything on a bare machine;
- without apt-get it installs no system package and names them, pointing at the README;
- a fresh clone's setup takes about two minutes, most of it pip, and a silent terminal for that
  long reads as a hang: each long step is announced.

The script runs here for real, with stand-ins for apt-get, dpkg, sudo and python3 that record
what they were asked (nothing is installed).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "setup.sh"
LONG_STEPS = (r"apt-get install", r"pip install [^\n]*-r \"?\$?\{?requirements", r"build-vcsim\.sh")
TEST_BENCH = {"etcd-server", "openssh-server", "cloud-init", "containerd", "docker-registry", "shellcheck"}
USER_NEEDS = {"graphviz", "golang-go", "golang-github-vmware-govmomi-dev"}
STAND_INS = {
    # dpkg -s: nothing is installed, so every package is asked for.
    "dpkg": "exit 1",
    "apt-get": 'echo "apt-get $*" >> "$LOG"',
    "sudo": '"$@"',
    # python3 -c (the ensurepip probe) succeeds; python3 -m venv .venv makes a .venv whose python logs.
    "python3": 'if [ "$1" = -m ] && [ "$2" = venv ]; then mkdir -p "$3/bin"; cp "$STANDINS/venv-python" "$3/bin/python"; fi',
    "venv-python": 'echo "python $*" >> "$LOG"',
}


def _project(tmp_path: Path, *, venv: bool) -> Path:
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(SETUP, project / "scripts" / "setup.sh")
    (project / "scripts" / "build-vcsim.sh").write_text('echo "build-vcsim" >> "$LOG"\n')
    if venv:
        (project / ".venv" / "bin").mkdir(parents=True)
        shutil.copy(tmp_path / "standins" / "venv-python", project / ".venv" / "bin" / "python")
    return project


def _run(tmp_path: Path, *args: str, apt: bool = True, venv: bool = False) -> tuple[subprocess.CompletedProcess[str], str]:
    standins = tmp_path / "standins"
    standins.mkdir()
    for name, body in STAND_INS.items():
        (standins / name).write_text(f"#!/bin/sh\n{body}\n")
        (standins / name).chmod(0o755)
    if not apt:
        (standins / "apt-get").unlink()
    # Only the stand-ins and the few programs the script itself needs: no real apt-get, no go.
    tools = tmp_path / "tools"
    tools.mkdir()
    for program in ("bash", "sed", "dirname", "id", "mkdir", "cp", "cat", "sh"):
        found = shutil.which(program)
        assert found, program
        (tools / program).symlink_to(found)
    project = _project(tmp_path, venv=venv)
    log = tmp_path / "log"
    log.write_text("")
    env = {"PATH": f"{standins}:{tools}", "LOG": str(log), "STANDINS": str(standins), "HOME": str(tmp_path)}
    result = subprocess.run(
        [shutil.which("bash") or "bash", str(project / "scripts" / "setup.sh"), *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    return result, log.read_text()


def _apt_installed(log: str) -> set[str]:
    return {pkg for line in log.splitlines() if line.startswith("apt-get install") for pkg in line.split()[2:]} - {
        "-y",
        "-qq",
    }


def test_a_users_setup_installs_what_running_the_project_needs_and_not_the_test_bench(tmp_path: Path) -> None:
    result, log = _run(tmp_path)
    assert result.returncode == 0, result.stderr
    installed = _apt_installed(log)
    assert installed >= USER_NEEDS, log
    assert installed & TEST_BENCH == set(), f"the test bench installed for a user: {sorted(installed & TEST_BENCH)}"
    assert "python -m pip install --progress-bar off -r requirements-cli.txt" in log
    assert "requirements-dev.txt" not in log
    assert "scripts/setup.sh --test" in result.stdout  # says where the test bench comes from


def test_the_test_setup_installs_the_test_bench_into_the_users_virtualenv(tmp_path: Path) -> None:
    result, log = _run(tmp_path, "--test", venv=True)
    assert result.returncode == 0, result.stderr
    assert _apt_installed(log) >= TEST_BENCH, log
    assert "python -m pip install --progress-bar off -r requirements-dev.txt" in log
    assert "build-vcsim" not in log


def test_the_test_setup_without_a_virtualenv_says_to_run_setup_first(tmp_path: Path) -> None:
    result, _ = _run(tmp_path, "--test")
    assert result.returncode == 1
    assert "run 'bash scripts/setup.sh' first" in result.stderr


def test_an_unknown_option_is_refused_with_the_ones_there_are(tmp_path: Path) -> None:
    result, log = _run(tmp_path, "--tests")
    assert result.returncode == 2
    assert "--test" in result.stderr and log == ""


def test_without_apt_get_it_names_the_packages_and_the_docs_say_what_to_do(tmp_path: Path) -> None:
    result, log = _run(tmp_path, apt=False)
    assert result.returncode == 0, result.stderr
    assert "apt-get" not in log
    [line] = [line for line in result.stdout.splitlines() if "no apt-get" in line]
    assert all(package in line for package in USER_NEEDS)
    [section] = re.findall(r'docs/tests.md, "([^"]+)"', line)
    doc = (ROOT / "docs" / "tests.md").read_text()
    assert f"\n## {section}\n" in doc, f"setup.sh points at docs/tests.md section {section!r}, which is missing"
    body = doc.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    assert "vcsim" in body and "graphviz" in body.lower() and "--test" in body
    # The README's quick start, the first thing a user reads, links it.
    assert "(docs/tests.md#without-apt-get)" in (ROOT / "README.md").read_text()


def test_ci_and_test_sh_set_up_the_test_bench_before_pytest() -> None:
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("bash ")]
    assert ci == ["bash scripts/setup.sh", "bash scripts/test.sh"]
    test_sh = [line for line in (ROOT / "scripts" / "test.sh").read_text().splitlines() if not line.startswith("#")]
    setup = test_sh.index("bash scripts/setup.sh --test")
    assert setup < min(i for i, line in enumerate(test_sh) if "pytest" in line or "ruff" in line)


def _code_lines() -> list[str]:
    return [line.strip() for line in SETUP.read_text().splitlines() if line.strip() and not line.strip().startswith("#")]


def test_every_long_step_is_announced_first() -> None:
    lines = _code_lines()
    for step in LONG_STEPS:
        [index] = [i for i, line in enumerate(lines) if re.search(step, line)]
        before = lines[max(0, index - 4) : index]
        assert any(line.startswith('echo "setup: ') for line in before), f"{step}: nothing printed before it"


def test_the_package_install_shows_its_progress() -> None:
    [install] = [line for line in _code_lines() if re.search(LONG_STEPS[1], line)]
    assert " -q" not in install, install  # pip -q prints nothing until it is done


@pytest.mark.parametrize("requirements", ["requirements-cli.txt", "requirements-dev.txt"])
def test_each_requirements_file_setup_installs_exists(requirements: str) -> None:
    assert (ROOT / requirements).is_file()
    assert requirements in SETUP.read_text()
    assert os.path.getsize(ROOT / requirements) > 0
