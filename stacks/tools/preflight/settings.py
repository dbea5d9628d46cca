"""Where preflight finds the vCenter connection settings, and a record of every source it tried.

In order, first found wins, per key:
1. the command's flags (`--server`, `--user`, `--password`, `--insecure`);
2. the stack's config as the Pulumi CLI reads it, secrets decrypted:
   `pulumi config --json --show-secrets --stack STACK`, run in the project folder (only when the
   `pulumi` executable is on PATH and preflight reads the stack's own `Pulumi.STACK.yaml`);
   `validate` refuses vCenter credentials there (every stack but `sim`), so in practice it gives
   the server; the account comes from the environment, as the fix below says;
3. the stack file's plain values (`secure:` ones need the CLI to decrypt; we never do it);
4. the environment: `VSPHERE_SERVER`, `VSPHERE_USER`, `VSPHERE_PASSWORD`,
   `VSPHERE_ALLOW_UNVERIFIED_SSL` (what pulumi-vsphere falls back to too).

The output of (2) is the CLI's `--json` shape (pulumi/pulumi pkg/cmd/pulumi/config/config.go,
`listConfig`, `configValueJSON`): one object keyed by the full key (`vsphere:password`), each with
`value` (a string; absent for a secret without --show-secrets), `objectValue` for structured values,
and `secret`. A failing CLI (no such stack, no passphrase, not logged in) prints `error: ...` on
stderr and exits non-zero; we report that line and go on to the next source.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.vcenter.settings import (
    CONFIG_ALLOW_UNVERIFIED_SSL,
    CONFIG_PASSWORD,
    CONFIG_SERVER,
    CONFIG_USER,
    ENV_FALLBACKS,
    REQUIRED_KEYS,
)

CLI_TIMEOUT_S = 60.0
"""A CLI that must reach a state backend (Pulumi Cloud, S3) may hang on a dead network."""

FLAGS = {
    CONFIG_SERVER: "--server",
    CONFIG_USER: "--user",
    CONFIG_PASSWORD: "--password",
    CONFIG_ALLOW_UNVERIFIED_SSL: "--insecure",
}


@dataclass
class Settings:
    """The settings found, where each came from, and what was tried (never a secret's value)."""

    values: dict[str, str] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    tried: dict[str, list[str]] = field(default_factory=dict)
    """Per key: each source asked, with its outcome, in order."""

    @property
    def missing(self) -> list[str]:
        return [key for key in REQUIRED_KEYS if key not in self.values]

    def offer(self, key: str, value: Any, source: str, *, absent: str = "not set") -> None:
        """Take `value` from `source` unless a source before it gave one; record the attempt."""
        if key in self.values:
            return
        if value is None or value == "":
            self.tried.setdefault(key, []).append(f"{source}: {absent}")
            return
        self.values[key] = str(value).lower() if isinstance(value, bool) else str(value)
        self.origin[key] = source
        self.tried.setdefault(key, []).append(f"{source}: found")

    def missing_message(self) -> str:
        lines = []
        for key in self.missing:
            lines.append(f"{key} not found; tried, in order: " + "; ".join(self.tried.get(key, [])))
        # The account comes from the run's environment only: `validate` refuses vsphere:user and
        # vsphere:password in a stack file (stacks/environment/loader.py CREDENTIAL_KEYS), so the fix
        # never suggests `pulumi config set` for them (issue 54 item 4).
        fixes = []
        if CONFIG_SERVER in self.missing:
            fixes.append("`pulumi config set vsphere:vsphereServer ...` (or export VSPHERE_SERVER, or --server)")
        if CONFIG_USER in self.missing or CONFIG_PASSWORD in self.missing:
            fixes.append(
                "export VSPHERE_USER=... VSPHERE_PASSWORD=... (your role's vCenter account; a stack file holds "
                "none, docs/environments.md), or pass --user/--password"
            )
        lines.append("Fix: " + "; ".join(fixes))
        return "\n".join(lines)

    def describe(self) -> str:
        """`vsphere:user from pulumi config, ...` for the report (sources only, never values)."""
        return ", ".join(f"{key} from {self.origin[key]}" for key in ENV_FALLBACKS if key in self.origin)


def read_cli_config(
    stack: str, *, project_dir: Path, environ: Mapping[str, str], timeout: float = CLI_TIMEOUT_S
) -> tuple[dict[str, Any] | None, str]:
    """The stack's `vsphere:*` values as the Pulumi CLI decrypts them, or None and why not."""
    command = f"`pulumi config --json --show-secrets --stack {stack}`"
    executable = shutil.which("pulumi", path=environ.get("PATH", os.defpath))
    if executable is None:
        return None, f"{command}: not run, the Pulumi CLI is not on PATH"
    env = {**environ, "PULUMI_SKIP_UPDATE_CHECK": "true"}
    try:
        result = subprocess.run(
            [executable, "config", "--json", "--show-secrets", "--stack", stack],
            cwd=project_dir,
            env=env,
            stdin=subprocess.DEVNULL,  # never a passphrase prompt: the CLI errors instead
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"{command}: no answer within {timeout:g}s (state backend unreachable?)"
    except OSError as error:
        return None, f"{command}: could not run ({error.strerror})"
    if result.returncode != 0:
        lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit status {result.returncode}"
        return None, f"{command}: failed: {reason.removeprefix('error: ')}"
    try:
        document = json.loads(result.stdout)
    except json.JSONDecodeError:
        return None, f"{command}: printed something that is not JSON"
    if not isinstance(document, dict):
        return None, f"{command}: printed JSON that is not an object"
    values = {
        key: entry.get("value")
        for key, entry in document.items()
        if key.startswith("vsphere:") and isinstance(entry, dict)
    }
    return values, f"{command}: read"


def resolve(
    *,
    stack: str,
    flags: Mapping[str, Any],
    stack_file: Path,
    stack_file_values: Mapping[str, Any],
    secret_keys: frozenset[str],
    ask_cli: bool,
    project_dir: Path,
    environ: Mapping[str, str],
) -> Settings:
    """Every `vsphere:*` setting from the first source that has it (see the module docstring)."""
    found = Settings()
    for key, flag in FLAGS.items():
        found.offer(key, flags.get(key), flag, absent="not given")

    cli_values: dict[str, Any] | None = None
    if ask_cli:
        cli_values, note = read_cli_config(stack, project_dir=project_dir, environ=environ)
    else:
        note = f"the Pulumi CLI: not asked (it reads the project's Pulumi.{stack}.yaml, not {stack_file})"
    for key in FLAGS:
        if cli_values is None:
            found.offer(key, None, note.split(": ", 1)[0], absent=note.split(": ", 1)[1])
        else:
            found.offer(key, cli_values.get(key), f"pulumi config --stack {stack}")

    for key in FLAGS:
        if key in secret_keys:
            absent = "holds it as a secret, which only the Pulumi CLI can decrypt"
            found.offer(key, None, stack_file.name, absent=absent)
        else:
            found.offer(key, stack_file_values.get(key), stack_file.name)

    for key, variable in ENV_FALLBACKS.items():
        found.offer(key, environ.get(variable), f"environment {variable}")
    return found
