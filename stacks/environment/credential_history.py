"""What a stack file held before, or opens, that a preview could use: warnings for `validate`.

- **An account in the file's git history** (issue 53 item 6). Earlier versions told users to keep
  `vsphere:password` (and `vsphere:user`) in the stack file as a `secure:` value. The stack's
  passphrase decrypts that value, and a preview runs with the same passphrase: a branch author can
  copy the old ciphertext out of git history into the pull request's stack file, and the preview
  decrypts it. Refusing the key now (`validate`, the program) does not close that: the account must
  be rotated, the passphrase changed, and the state's history purged (docs/deploy.md, "An account
  that was ever in a stack file"). Found with git's pickaxe (`git log -G`), which lists the commits
  that added or removed a line with the key (`-G`): a file that ever held it shows at least one.
- **ESC environments the file imports** (issue 53 item 7): every command on the stack, a preview
  included, opens the environments listed under the file's top-level `environment:`; a deploy
  account there is handed to whoever can run a preview.

Only warnings: the file is valid, the exposure is in what already happened or what the
environments hold, which the file cannot show.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

CREDENTIAL_KEYS = ("vsphere:password",)
"""What a preview could still decrypt. `vsphere:user` alone names an account and opens nothing (the
repositories of earlier versions hold it in their history; its password is what matters)."""


def _git(folder: Path, *args: str) -> str | None:
    try:
        result = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None  # no git here: nothing to say
    return result.stdout if result.returncode == 0 else None


def credential_history_warnings(path: Path) -> list[str]:
    """One warning per secret credential key the file's git history ever held (none outside a git checkout)."""
    warnings = []
    for key in CREDENTIAL_KEYS:
        # --follow: the file may have been renamed (a clone of another stack's file).
        # -G with the key at a line's start: a YAML key, not a comment naming it (our own stack
        # files' history has only such comments, and a fresh clone must not be told to rotate).
        pattern = rf"^[[:space:]]*{key}[[:space:]]*:"
        log = _git(path.parent, "log", "--follow", "--format=%h %as", "-E", "-G", pattern, "--", path.name)
        commits = (log or "").split()
        if not commits:
            continue
        first = " ".join(commits[-2:])
        warnings.append(
            f"{path.name} held `{key}` in its git history (commit {first}): its old `secure:` value still "
            "opens with this stack's passphrase, which previews share. Rotate that vCenter account, change "
            "the passphrase (`pulumi stack change-secrets-provider`), and purge the state's history "
            '(docs/deploy.md, "An account that was ever in a stack file")'
        )
    return warnings


def imported_environment_warnings(path: Path) -> list[str]:
    """A warning naming the ESC environments the file imports, which every preview opens."""
    try:
        document: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []  # the stack file's own check reports an unreadable file
    imported = document.get("environment") if isinstance(document, dict) else None
    if not imported:
        return []
    names = ", ".join(str(name) for name in (imported if isinstance(imported, list) else [imported]))
    return [
        f"{path.name} imports the ESC environment(s) {names}: every `pulumi preview` of the stack opens them, "
        "so they must hold nothing a preview may not have (no deploy account). Give the deploy job its "
        'account with `esc run ENV -- pulumi up` instead (docs/deploy.md, "Credentials")'
    ]
