"""git in a scratch repository, as the workflow tests make them: an author of its own, output back."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    """`git ARGS` in `repo` (check=True), its stdout stripped; commits get a throwaway author."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
