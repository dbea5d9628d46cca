"""`python -m stacks.tools.simulator STACK`: the bundled vCenter simulator, serving what STACK names.

Starts `build/vcsim-harness` (built by scripts/build-vcsim.sh) with the inventory the stack file
names (`-stack-inventory`, vcsim/stack_inventory.go), plants the folder and the templates over the
API (`stacks.tools.simulator.plant`), prints the address, the environment variables and the
preflight command, then serves until Ctrl-C (or SIGTERM). `scripts/simulator.sh` runs it.

The stack file decides everything: edit it and restart the simulator, and preflight judges the
edited stack against a vCenter that has it. Meant for the `sim` stack (Pulumi.sim.yaml), whose
`vsphere:vsphereServer` is this simulator's default address. Loopback only, plain HTTP.

Exit status: 0 after Ctrl-C, 1 when the simulator could not start or be planted, 2 on an invalid
stack file.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from types import FrameType

from stacks import PROJECT_DIR
from stacks.environment.loader import InvalidEnvironment, load_environment, read_stack_file
from stacks.environment.model import Environment
from stacks.tools.simulator.plant import harness_flags, inventory_of, plant

HARNESS = PROJECT_DIR / "build" / "vcsim-harness"
DEFAULT_PORT = 8989
"""govmomi vcsim's customary port; Pulumi.sim.yaml's `vsphere:vsphereServer` names it."""
START_TIMEOUT_S = 60.0


class SimulatorError(Exception):
    """The simulator did not start, or planting failed: one line for the user."""


def _read_url(process: subprocess.Popen[bytes]) -> str:
    """The harness's `VCSIM_URL=...` line (its start-up protocol, vcsim/main.go)."""
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    buffer = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout.fileno()], [], [], 0.5)
        if not ready:
            if process.poll() is not None:
                break
            continue
        chunk = os.read(process.stdout.fileno(), 4096)
        if not chunk:
            break
        buffer += chunk
        for line in buffer.decode(errors="replace").splitlines():
            if line.startswith("VCSIM_URL="):
                return line[len("VCSIM_URL=") :].strip()
    raise SimulatorError(
        f"{HARNESS.relative_to(PROJECT_DIR)} did not print its URL within {START_TIMEOUT_S:.0f} s "
        f"(exit status {process.poll()}); is the port taken? Try --port 0 (any free port)"
    )


def refuse_a_busy_port(port: int) -> None:
    """One line when another program listens on the port (the harness would stop on it too)."""
    if port == 0:
        return
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's listener: TIME_WAIT is no obstacle
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            raise SimulatorError(
                f"port {port} on 127.0.0.1 is in use ({error.strerror}): stop what listens there "
                "(an earlier simulator?) or pass --port 0 (any free port)"
            ) from None


def start(
    env: Environment, *, port: int, workdir: Path, harness: Path = HARNESS
) -> tuple[subprocess.Popen[bytes], str]:
    """Start the harness serving `env`'s inventory; (the process, its URL with credentials)."""
    inventory = workdir / "stack-inventory.json"
    return start_inventory(
        inventory_of(env), harness_flags(env, str(inventory)), port=port, workdir=workdir, harness=harness
    )


def start_inventory(
    inventory: dict[str, object], flags: list[str], *, port: int, workdir: Path, harness: Path = HARNESS
) -> tuple[subprocess.Popen[bytes], str]:
    """Start the harness serving `inventory` (the `-stack-inventory` JSON, written to
    `workdir/stack-inventory.json`, which `flags` name) with `flags`; (the process, its URL)."""
    if not harness.exists():
        raise SimulatorError(f"{harness} is missing; build it with `bash scripts/build-vcsim.sh` (needs Go)")
    refuse_a_busy_port(port)
    (workdir / "stack-inventory.json").write_text(json.dumps(inventory, indent=2))
    process = subprocess.Popen(
        # -exit-on-stdin-eof: the harness ends with us even if we are killed (our end of the pipe closes).
        [str(harness), "-port", str(port), "-exit-on-stdin-eof", *flags],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        return process, _read_url(process)
    except BaseException:
        stop(process)
        raise


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.stdin is not None:
        process.stdin.close()
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def plant_over_api(env: Environment, url: str) -> list[str]:
    """Log in with the URL's credentials, plant the folder and templates, log out."""
    from components.vcenter.errors import VsphereError
    from components.vcenter.faults import fault_text
    from components.vcenter.session import session
    from components.vcenter.settings import VcenterConnection

    try:
        with session(VcenterConnection.from_url(url, verify_ssl=False)) as si:
            return plant(si, env)
    except VsphereError as error:
        raise SimulatorError(f"planting the templates failed: {error}") from error
    except Exception as error:  # a vim fault from a task
        raise SimulatorError(f"planting the templates failed: {fault_text(error)}") from error


def instructions(stack: str, stack_server: object, url: str, stack_user: object) -> list[str]:
    """What to run against the simulator at `url`, given the stack file's `vsphere:vsphereServer` and
    `vsphere:user` (only the `sim` stack names one: every other stack file may not, so its command
    brings VSPHERE_USER too; stacks/environment/loader.py CREDENTIAL_KEYS)."""
    parts = urllib.parse.urlsplit(url)
    server = f"{parts.scheme}://{parts.hostname}:{parts.port}"
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    # The stack file's own vsphere:vsphereServer wins over VSPHERE_SERVER (stacks/tools/preflight/command.py),
    # so a simulator on another port needs --server.
    flag = "" if str(stack_server or "").rstrip("/") == server else f" --server {server}"
    return [
        f"VCSIM_URL={url}",
        f"export VSPHERE_SERVER={server}",
        f"export VSPHERE_USER={user}",
        f"export VSPHERE_PASSWORD={password}",
        f"then: {'' if stack_user else f'VSPHERE_USER={user} '}VSPHERE_PASSWORD={password} "
        f"python -m stacks preflight {stack}{flag}",
    ]


def _serve_until_signal(process: subprocess.Popen[bytes]) -> None:
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    while not stopping and process.poll() is None:
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stacks.tools.simulator",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("stack", nargs="?", default="sim", help="stack name: serves Pulumi.STACK.yaml (default sim)")
    parser.add_argument("--file", help="read this stack file instead")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0: any free port)"
    )
    args = parser.parse_args(argv)
    path = Path(args.file) if args.file else PROJECT_DIR / f"Pulumi.{args.stack}.yaml"
    try:
        view = read_stack_file(path)
        env = load_environment(view)
    except InvalidEnvironment as error:
        print(f"error: {path.name} is not a valid stack file:\n{error}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="vcsim-stack-") as workdir:
        try:
            process, url = start(env, port=args.port, workdir=Path(workdir))
        except SimulatorError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        try:
            planted = plant_over_api(env, url)
            print(f"simulator: serving the inventory of {path.name} (stack {args.stack!r})", flush=True)
            for line in planted:
                print(f"planted: {line}", flush=True)
            stack_server, stack_user = view.values.get("vsphere:vsphereServer"), view.values.get("vsphere:user")
            for line in instructions(args.stack, stack_server, url, stack_user):
                print(line, flush=True)
            print("Ctrl-C stops the simulator.", flush=True)
            _serve_until_signal(process)
        except SimulatorError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        finally:
            stop(process)
    return 0


if __name__ == "__main__":
    sys.exit(main())
