"""`python -m stacks` outside the virtualenv (issue 25, item 4): a Python without the project's
dependencies gets how to create and activate `.venv`, never a traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*python: str, args: tuple[str, ...] = ("validate", "dev")) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*python, "-m", "stacks", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
    )


def assert_says_how_to_set_up(result: subprocess.CompletedProcess[str], command: str = "validate dev") -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "bash scripts/setup.sh" in result.stderr
    assert "source .venv/bin/activate" in result.stderr
    assert f".venv/bin/python -m stacks {command}" in result.stderr  # the user's own command, runnable as is


def test_a_python_without_site_packages_is_told_to_use_the_virtualenv() -> None:
    # -S: this very interpreter without its site-packages: stdlib only, as a bare system python.
    result = run(sys.executable, "-S")
    assert_says_how_to_set_up(result)
    assert "missing: the Python package 'yaml'" in result.stderr or "'pydantic'" in result.stderr


def test_the_help_of_a_bare_python_says_the_same() -> None:
    assert_says_how_to_set_up(run(sys.executable, "-S", args=("--help",)), "--help")


@pytest.mark.skipif(shutil.which("python3", path="/usr/bin:/bin") is None, reason="no system python3 here")
def test_the_system_python3() -> None:
    probe = subprocess.run(["/usr/bin/python3", "-c", "import pydantic, yaml, pulumi"], capture_output=True, timeout=60)
    if probe.returncode == 0:
        pytest.skip("the system python3 has the project's dependencies; nothing to refuse")
    assert_says_how_to_set_up(run("/usr/bin/python3"))


def _site_without(tmp_path: Path, *left_out: str) -> Path:
    """A site-packages of the project's virtualenv less some distributions: the link-farm a Python
    started with -S reads through PYTHONPATH, as a venv where those failed to install."""
    import pydantic

    site = Path(pydantic.__file__).resolve().parent.parent
    partial = tmp_path / "site"
    partial.mkdir()
    for entry in site.iterdir():
        if entry.suffix == ".pth" or entry.name == "__pycache__" or entry.name.lower().startswith(left_out):
            continue
        (partial / entry.name).symlink_to(entry)
    return partial


@pytest.mark.parametrize(
    ("left_out", "module", "args"),
    [
        (("pulumi",), "pulumi", ("validate", "dev")),
        # pyVmomi is imported only when `plan` runs (the program's providers), after the CLI loaded.
        (("pyvmomi",), "pyVmomi", ("plan", "dev", "--out", "{tmp}/plan")),
    ],
    ids=["without-pulumi", "without-pyvmomi-plan"],
)
def test_a_python_lacking_one_package_is_told_the_same_whenever_it_is_imported(
    tmp_path: Path, left_out: tuple[str, ...], module: str, args: tuple[str, ...]
) -> None:
    site = _site_without(tmp_path, *left_out)
    argv = tuple(a.replace("{tmp}", str(tmp_path)) for a in args)
    result = subprocess.run(
        [sys.executable, "-S", "-m", "stacks", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)},
        timeout=300,
    )
    assert_says_how_to_set_up(result, " ".join(argv))
    assert f"missing: the Python package '{module}'" in result.stderr
