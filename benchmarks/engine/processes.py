"""Start a server process that announces itself on stdout, and stop it again.

Both kinds of server the engine benchmark starts speak this way: the vCenter simulator harness
prints `VCSIM_URL=...` (vcsim/main.go), and a Pulumi provider plugin prints its gRPC port as the
first line of stdout, which is how the engine finds it (`pulumi/dynamic/__main__.py` and
`pulumi/provider/experimental/server.py` both write `f"{port}\\n"`; the engine reads it in
sdk/go/common/resource/plugin/plugin.go, `parsePort`).
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

START_TIMEOUT_S = 60.0


class ServerDidNotStart(RuntimeError):
    """The process exited or stayed silent before printing its address."""


def start_announcing(
    command: Sequence[str],
    announcement: Callable[[str], str | None],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = START_TIMEOUT_S,
) -> tuple[subprocess.Popen[bytes], str]:
    """Start `command`; return it and what `announcement` found in the first stdout line it accepts."""
    process = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    buffer = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout.fileno()], [], [], 0.2)
        if not ready:
            if process.poll() is not None:
                break
            continue
        chunk = os.read(process.stdout.fileno(), 4096)
        if not chunk:
            break
        buffer += chunk
        for line in buffer.decode(errors="replace").splitlines():
            found = announcement(line.strip())
            if found is not None:
                return process, found
    stop(process)
    stderr = process.stderr.read().decode(errors="replace")[-2000:] if process.stderr else ""
    raise ServerDidNotStart(f"{' '.join(command)} did not announce itself within {timeout:g} s: {stderr}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Close stdin (the harness exits on EOF), then SIGTERM, then SIGKILL after 10 s."""
    if process.stdin is not None:
        process.stdin.close()
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def port_line(line: str) -> str | None:
    """A provider plugin's announcement: its port, alone on the line."""
    return line if line.isdigit() else None


def vcsim_url_line(line: str) -> str | None:
    return line.removeprefix("VCSIM_URL=") if line.startswith("VCSIM_URL=") else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = START_TIMEOUT_S) -> None:
    """Wait until `process` accepts connections on 127.0.0.1:`port`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    stop(process)
    raise ServerDidNotStart(f"nothing listened on 127.0.0.1:{port} within {timeout:g} s")
