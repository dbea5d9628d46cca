"""The one rule for tests that need a real program (etcd, sshd, cloud-init, containerd, the vCenter
simulator): skip where it is missing on a developer's machine, fail under CI, where
`scripts/setup.sh` installs all of them and a skip would hide a test that never ran."""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest


def unavailable(what: str, message: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} unavailable under CI: {message}", pytrace=False)
    pytest.skip(f"{what} unavailable: {message}")


def find_program(name: str, path: str) -> str | None:
    """`name` on PATH, else `path` (Debian's location) when executable, else None."""
    return shutil.which(name) or (path if os.access(path, os.X_OK) else None)


def require_program(name: str, path: str, package: str) -> str:
    found = find_program(name, path)
    if found is None:
        unavailable(name, f"no {name} on PATH (apt-get install {package}; scripts/setup.sh does)")
    return found
