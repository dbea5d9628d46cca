"""Issue 40, item 10: the jobs that hold credentials install hash-pinned packages only.

A job that sees a secret (an environment's vCenter account, passphrase, state keys) or may write
(the PR comments) installs from `requirements.lock` / `policy/requirements.lock`: every package,
transitive ones included, pinned to one version and the sha256 of its files, installed with
`pip install --require-hashes` ("Hash-checking mode": pip refuses any requirement without a hash,
any file whose hash differs, and any dependency the file does not list; pip's documentation,
*Secure installs*). `bash scripts/lock-requirements.sh` (uv pip compile --generate-hashes) writes them.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT = Path(__file__).resolve().parents[2]
WORKFLOWS = PROJECT / ".github" / "workflows"
ALL = sorted(WORKFLOWS.glob("*.yml"))
LOCKS = {
    PROJECT / "requirements.txt": PROJECT / "requirements.lock",
    PROJECT / "policy" / "requirements.txt": PROJECT / "policy" / "requirements.lock",
}
SECRET = re.compile(r"\$\{\{\s*secrets\.")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)(?:\s*\\)?$")
# The machine the workflows install on: Linux x86_64, CPython 3.11 (actions/setup-python).
CI_MARKERS = {
    **default_environment(),
    "python_version": "3.11",
    "python_full_version": "3.11.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def _load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    if True in document:  # YAML 1.1 reads the key `on` as True
        document["on"] = document.pop(True)
    return document


def _holds_credentials(job: dict[str, Any]) -> bool:
    permissions = job.get("permissions") or {}
    writes = isinstance(permissions, dict) and any(
        level == "write" and scope != "id-token" for scope, level in permissions.items()
    )
    return bool(job.get("environment")) or writes or bool(SECRET.search(yaml.safe_dump(job)))


def _pip_installs(job: dict[str, Any]) -> list[list[str]]:
    commands = []
    for step in job.get("steps", []):
        script = str(step.get("run", "")).replace("\\\n", " ")
        for line in script.splitlines():
            if not re.search(r"pip3? install", line):
                continue
            for part in re.split(r"&&|;|\|\|", line):
                words = shlex.split(part, comments=True)
                if "pip" in " ".join(words[:1]) and "install" in words:
                    commands.append(words)
    return commands


def _locked(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        found = PIN.match(line.strip())
        if found:
            pins[canonicalize_name(found.group(1))] = found.group(2)
    return pins


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_jobs_that_hold_credentials_install_hash_pinned_packages_only(path: Path) -> None:
    for job_id, job in _load(path)["jobs"].items():
        if not _holds_credentials(job):
            continue
        for words in _pip_installs(job):
            where = f"{path.name} {job_id}: {' '.join(words)}"
            assert "--require-hashes" in words, f"{where}: without --require-hashes"
            files = [words[i + 1] for i, word in enumerate(words) if word in ("-r", "--requirement")]
            assert files and all(name.endswith(".lock") for name in files), f"{where}: not a lock file"
            rest = words[words.index("install") + 1 :]
            loose = [w for w in rest if not w.startswith("-") and w not in files]
            assert not loose, f"{where}: installs {loose} outside the lock"


@pytest.mark.parametrize(("requirements", "lock"), LOCKS.items(), ids=lambda p: str(p.relative_to(PROJECT)))
def test_each_lock_pins_what_its_requirements_file_pins(requirements: Path, lock: Path) -> None:
    locked = _locked(lock)
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{lock.name}: {requirement.name} missing; run `bash scripts/lock-requirements.sh`"
        assert requirement.specifier.contains(locked[name]), (
            f"{lock.name}: {requirement.name}=={locked[name]} but {requirements.name} says {requirement.specifier}; "
            "run `bash scripts/lock-requirements.sh`"
        )


@pytest.mark.parametrize("lock", LOCKS.values(), ids=lambda p: str(p.relative_to(PROJECT)))
def test_every_locked_package_has_a_hash_and_nothing_is_unpinned(lock: Path) -> None:
    text = lock.read_text()
    entries = re.split(r"\n(?=[^\s#])", text.split("\n", 2)[2] if text.startswith("#") else text)
    assert entries
    for entry in entries:
        if not entry.strip() or entry.lstrip().startswith("#"):
            continue
        head = entry.splitlines()[0].strip()
        assert PIN.match(head), f"{lock.name}: {head!r} is not one pinned version"
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", entry), f"{lock.name}: {head} has no sha256"


@pytest.mark.parametrize(("requirements", "lock"), LOCKS.items(), ids=lambda p: str(p.relative_to(PROJECT)))
def test_each_lock_holds_every_dependency_of_what_it_holds(requirements: Path, lock: Path) -> None:
    """pip --require-hashes refuses a dependency the lock lacks: find it here, not in a deployment."""
    locked = _locked(lock)
    checked: set[str] = set()
    for name, version in locked.items():
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if distribution.version != version:
            continue  # this test environment has another version: its metadata says nothing about the lock's
        checked.add(name)
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker and not requirement.marker.evaluate({**CI_MARKERS, "extra": ""}):
                continue
            dependency = canonicalize_name(requirement.name)
            assert dependency in locked, f"{lock.name}: {name} needs {requirement}, which it does not lock"
            assert requirement.specifier.contains(locked[dependency], prereleases=True), (
                f"{lock.name}: {name} needs {requirement}, the lock has {locked[dependency]}"
            )
    # The test environment installs requirements-dev.txt, which pins the same direct packages: those
    # at least are checked here (their transitive ones where this environment has the lock's version).
    direct = {
        canonicalize_name(Requirement(line.split("#", 1)[0]).name)
        for line in requirements.read_text().splitlines()
        if line.split("#", 1)[0].strip()
    }
    assert direct <= checked, f"not installed here at the lock's version: {sorted(direct - checked)}"
