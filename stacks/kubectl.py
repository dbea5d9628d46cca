"""How `stacks verify` talks to a cluster: the kubeconfig it uses and a thin `kubectl` runner.

`kubectl` rather than the `kubernetes` Python client, which is not a dependency of this project.
The kubeconfig: `--kubeconfig PATH`; else the stack output `kubeconfig` when the Pulumi CLI is
installed (`pulumi stack output kubeconfig --show-secrets`, written to a private temporary file
and removed afterwards); else `KUBECONFIG`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

KUBECTL_TIMEOUT_S = 60


class VerifyError(Exception):
    """A problem the user fixes (no kubeconfig, no kubectl, an unreadable answer); printed as one line."""


def kubeconfig_command(stack: str) -> str:
    """How to write the admin kubeconfig by hand: readable by its owner only from the first byte
    (umask 077 before the file exists; a chmod after the write leaves a window), and outside the
    repository, where `git add -A` cannot pick it up (issue 53 item 10)."""
    return (
        f"mkdir -p ~/.kube && (umask 077 && pulumi stack output kubeconfig --show-secrets --stack {stack} "
        f"> ~/.kube/{stack}.config)"
    )


@contextmanager
def kubeconfig_for(stack: str, given: str | None) -> Iterator[str]:
    if given:
        if not Path(given).is_file():
            raise VerifyError(f"--kubeconfig {given}: no such file")
        yield given
        return
    pulumi = shutil.which("pulumi")
    if pulumi:
        result = subprocess.run(
            [pulumi, "stack", "output", "kubeconfig", "--show-secrets", "--stack", stack],
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_S,
            check=False,
        )
        if result.returncode == 0 and result.stdout.strip():
            with tempfile.TemporaryDirectory(prefix="verify-") as folder:
                path = Path(folder) / "kubeconfig"
                path.touch(mode=0o600)
                path.write_text(result.stdout)
                yield str(path)
            return
    from_env = os.environ.get("KUBECONFIG")
    if from_env:
        yield from_env
        return
    raise VerifyError(
        f"no kubeconfig: the stack output 'kubeconfig' of stack {stack!r} could not be read "
        "(is the Pulumi CLI installed and logged in?) and KUBECONFIG is not set; run "
        f"`{kubeconfig_command(stack)}` and pass --kubeconfig ~/.kube/{stack}.config"
    )


class Kubectl:
    """`kubectl --kubeconfig K --namespace N ...`; `namespace` is the default one, and each call
    may name another."""

    def __init__(self, kubeconfig: str, namespace: str) -> None:
        binary = shutil.which("kubectl")
        if binary is None:
            raise VerifyError("kubectl is not on PATH: install it (https://kubernetes.io/docs/tasks/tools/)")
        self.binary = [binary, "--kubeconfig", kubeconfig]
        self.namespace = namespace

    def run(
        self, *args: str, namespace: str | None = None, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        command = [*self.binary, "--namespace", namespace or self.namespace, *args]
        try:
            return subprocess.run(
                command, input=stdin, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired as error:
            raise VerifyError(f"kubectl {' '.join(args)} did not answer within {KUBECTL_TIMEOUT_S} s") from error

    def json(self, *args: str, namespace: str | None = None) -> dict[str, Any]:
        """`kubectl ARGS --output json`, parsed; a refusal is a VerifyError naming the command."""
        result = self.run(*args, "--output", "json", namespace=namespace)
        if result.returncode != 0:
            raise VerifyError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        parsed: dict[str, Any] = json.loads(result.stdout)
        return parsed

    def items(self, *args: str, namespace: str | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.json(*args, namespace=namespace).get("items", [])
        return items
