"""`python -m stacks preflight STACK`: check, read-only, that vCenter has what the stack names.

Connects with pyvmomi, reads the inventory once (`stacks.tools.preflight_checks.read_inventory`) and
prints one line per finding: `OK`, `WARN` or `BLOCKER`, the stack-file key, the message.

Exit status: 0 when nothing blocks (warnings allowed), 1 on any blocker (including a vCenter that
cannot be reached or read), 2 on an invalid stack file or missing connection settings. Never a
traceback.

Connection settings, first found wins: `--server/--user/--password/--insecure`, the stack file's
`vsphere:vsphereServer`, `vsphere:user`, `vsphere:allowUnverifiedSsl` (the password there is a
secret and cannot be read offline), then `VSPHERE_SERVER`, `VSPHERE_USER`, `VSPHERE_PASSWORD`,
`VSPHERE_ALLOW_UNVERIFIED_SSL`. Prefer the environment for the password: command lines are visible
to other users of the machine.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from stacks import PROJECT_DIR
from stacks.environment.loader import ConfigView, load_environment, read_stack_file
from stacks.environment.model import Environment

EXIT_OK = 0
EXIT_BLOCKED = 1
EXIT_INVALID = 2


def register(subparsers: Any) -> None:
    """Add the `preflight` subcommand to `python -m stacks`."""
    parser = subparsers.add_parser(
        "preflight",
        help="check, read-only, that vCenter has everything the stack names; one line per finding",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml")
    parser.add_argument("--file", help="read this file instead (same format)")
    parser.add_argument(
        "--server", help="vCenter address (env VSPHERE_SERVER), e.g. vc.example.com or http://127.0.0.1:8989"
    )
    parser.add_argument("--user", help="vCenter user (env VSPHERE_USER)")
    parser.add_argument("--password", help="vCenter password (env VSPHERE_PASSWORD; prefer the environment)")
    parser.add_argument("--insecure", action="store_true", default=None, help="do not verify vCenter's TLS certificate")
    parser.set_defaults(func=cmd_preflight)


def connection_config(args: argparse.Namespace, view: ConfigView) -> dict[str, Any]:
    """The `vsphere:*` settings from flags, else the stack file; the helper falls back to env."""
    from components.vsphere._vsphere import (
        CONFIG_ALLOW_UNVERIFIED_SSL,
        CONFIG_PASSWORD,
        CONFIG_SERVER,
        CONFIG_USER,
    )

    flags = {
        CONFIG_SERVER: args.server,
        CONFIG_USER: args.user,
        CONFIG_PASSWORD: args.password,
        CONFIG_ALLOW_UNVERIFIED_SSL: "true" if args.insecure else None,
    }
    return {key: flag if flag is not None else view.values.get(key) for key, flag in flags.items()}


def cmd_preflight(args: argparse.Namespace) -> int:
    path = Path(args.file) if args.file else PROJECT_DIR / f"Pulumi.{args.stack}.yaml"
    view = read_stack_file(path)
    env = load_environment(view)  # InvalidEnvironment: every problem, exit 2 (stacks.tools.cli)
    return run_preflight(env, connection_config(args, view), label=args.stack)


def run_preflight(
    env: Environment,
    config: Mapping[str, Any],
    *,
    label: str,
    out: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Connect, read, check, print; the exit status."""
    # pyVmomi and the shared helper load only here: `validate` and `plan` stay light.
    from components.vsphere._vsphere import (
        CONFIG_SERVER,
        VcenterConnection,
        VsphereError,
        connect,
        fault_text,
        forget,
    )
    from stacks.tools.preflight_checks import check, read_inventory

    stream = out or sys.stdout
    try:
        conn = VcenterConnection.from_pulumi_config(config, environ)
    except VsphereError as error:
        print(f"error: {error}; or pass --server, --user, --password", file=sys.stderr)
        return EXIT_INVALID
    try:
        si = connect(conn)
    except Exception as error:  # refused, DNS, TLS, login: one line, never a traceback
        print(f"BLOCKER {CONFIG_SERVER}: cannot connect to vCenter {conn.address}: {fault_text(error)}", file=stream)
        return EXIT_BLOCKED
    try:
        inventory = read_inventory(si, env.vcenter.datacenter)
    except Exception as error:  # a fault or dropped connection mid-read
        print(
            f"BLOCKER {CONFIG_SERVER}: reading the inventory of {conn.address} failed: {fault_text(error)}", file=stream
        )
        return EXIT_BLOCKED
    finally:
        forget(conn)
    findings = check(env, inventory)
    for finding in findings:
        print(finding.render(), file=stream)
    counts = {level: sum(1 for f in findings if f.level == level) for level in ("BLOCKER", "WARN", "OK")}
    verdict = "blocked" if counts["BLOCKER"] else "ready"
    print(
        f"preflight {label} against {conn.address}: {verdict}: {counts['BLOCKER']} blocker(s), "
        f"{counts['WARN']} warning(s), {counts['OK']} ok",
        file=stream,
    )
    return EXIT_BLOCKED if counts["BLOCKER"] else EXIT_OK
