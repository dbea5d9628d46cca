"""A busy simulator port is one line that names the port and the fix, never a Go stack trace:
both for the harness itself (vcsim/main.go) and for `python -m stacks.tools.simulator`, which
starts it. govmomi's `NewServer` panics when it cannot listen (simulator/internal/server.go
`newLocalListener`)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_parts import unavailable

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "build" / "vcsim-harness"


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield int(listener.getsockname()[1])


def _harness() -> Path:
    build = subprocess.run(["bash", "scripts/build-vcsim.sh"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    if build.returncode != 0 or not HARNESS.exists():
        unavailable("vCenter simulator", f"scripts/build-vcsim.sh failed: {build.stderr.strip()[-500:]}")
    return HARNESS


def test_the_harness_says_the_port_is_taken_in_one_line(busy_port: int) -> None:
    run = subprocess.run([str(_harness()), "-port", str(busy_port)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        f"vcsim-harness: cannot listen on 127.0.0.1:{busy_port} (listen tcp 127.0.0.1:{busy_port}: bind: address "
        "already in use): another program uses the port; stop it or pass another -port (0: any free port)"
    ]
    assert "VCSIM_URL" not in run.stdout


def test_the_simulator_command_says_the_port_is_taken_before_starting_anything(busy_port: int) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "stacks.tools.simulator", "--port", str(busy_port)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        f"error: port {busy_port} on 127.0.0.1 is in use (Address already in use): stop what listens there "
        "(an earlier simulator?) or pass --port 0 (any free port)"
    ]
    assert "goroutine" not in run.stderr and "panic" not in run.stderr
