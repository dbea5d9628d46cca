"""`python -m stacks preflight STACK`: check, read-only, that vCenter has what the stack names.

Logs in to vCenter, reads the inventory once (`components.vcenter.inventory.read_inventory`),
logs out, judges it with the pure checks of `stacks.tools.preflight.checks` and prints one line per
finding (`OK`, `WARN` or `BLOCKER`, the stack-file key, the message), then a summary line with
the counts of each.

Exit status: 0 when nothing blocks (warnings allowed), 1 on any blocker (including a vCenter that
cannot be reached or read), 2 on an invalid stack file or missing connection settings. Never a
traceback.

Connection settings, per key the first source that has it: `--server/--user/--password/--insecure`;
the stack's config as the Pulumi CLI reads it, secrets decrypted (`pulumi config --json
--show-secrets --stack STACK`, when `pulumi` is on PATH); the stack file's plain values; then
`VSPHERE_SERVER`, `VSPHERE_USER`, `VSPHERE_PASSWORD`, `VSPHERE_ALLOW_UNVERIFIED_SSL`. When one is
missing, the error lists every source tried and what each said. Prefer the stack's secret or the
environment for the password: command lines are visible to other users of the machine.

The session preflight opens is logged out before it prints its findings.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from stacks import PROJECT_DIR
from stacks.environment.loader import ConfigView, load_environment, read_stack_file
from stacks.environment.model import Environment
from stacks.tools.command_help import command_parser
from stacks.tools.preflight.checks.report import Finding

if TYPE_CHECKING:
    from components.vcenter.inventory_model import Inventory
    from stacks.tools.preflight.settings import Settings

EXIT_OK = 0
EXIT_BLOCKED = 1
EXIT_INVALID = 2


def register(subparsers: Any) -> None:
    """Add the `preflight` subcommand to `python -m stacks`."""
    parser = command_parser(
        subparsers,
        "preflight",
        summary="check, read-only, that vCenter has everything the stack names; one line per finding",
        description=__doc__ or "",
        needs="vcenter",
        exit_statuses=None,  # the description's own paragraph
    )
    parser.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml")
    parser.add_argument("--file", help="read this file instead (same format)")
    parser.add_argument(
        "--server", help="vCenter address (env VSPHERE_SERVER), e.g. vc.example.com or http://127.0.0.1:8989"
    )
    parser.add_argument("--user", help="vCenter user (env VSPHERE_USER)")
    parser.add_argument("--password", help="vCenter password (env VSPHERE_PASSWORD; prefer the environment)")
    parser.add_argument("--insecure", action="store_true", default=None, help="do not verify vCenter's TLS certificate")
    parser.add_argument(
        "--login-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long to wait for vCenter to answer the start of the login (default 30)",
    )
    parser.set_defaults(func=cmd_preflight)


def connection_settings(args: argparse.Namespace, view: ConfigView, path: Path) -> Settings:
    """The `vsphere:*` settings and where each came from (stacks.tools.preflight.settings)."""
    from components.vcenter.settings import (
        CONFIG_ALLOW_UNVERIFIED_SSL,
        CONFIG_PASSWORD,
        CONFIG_SERVER,
        CONFIG_USER,
    )
    from stacks.tools.preflight.settings import resolve

    flags = {
        CONFIG_SERVER: args.server,
        CONFIG_USER: args.user,
        CONFIG_PASSWORD: args.password,
        CONFIG_ALLOW_UNVERIFIED_SSL: "true" if args.insecure else None,
    }
    return resolve(
        stack=args.stack,
        flags=flags,
        stack_file=path,
        stack_file_values=view.values,
        secret_keys=view.secret_keys,
        # The CLI reads the project's Pulumi.STACK.yaml: ask it only when that is the file we check.
        ask_cli=path.resolve() == (PROJECT_DIR / f"Pulumi.{args.stack}.yaml").resolve(),
        project_dir=PROJECT_DIR,
        environ=os.environ,
    )


def cmd_preflight(args: argparse.Namespace) -> int:
    path = Path(args.file) if args.file else PROJECT_DIR / f"Pulumi.{args.stack}.yaml"
    view = read_stack_file(path)
    env = load_environment(view)  # InvalidEnvironment: every problem, exit 2 (stacks.cli)
    settings = connection_settings(args, view, path)
    if settings.missing:
        print(f"error: vCenter connection settings missing for stack {args.stack!r}:", file=sys.stderr)
        print(settings.missing_message(), file=sys.stderr)
        return EXIT_INVALID
    return run_preflight(env, settings, label=args.stack, login_timeout=args.login_timeout)


def read_privileges(si: object, env: Environment, inventory: Inventory) -> None:
    """The account's missing privileges on the objects of `checks.privileges.ROLE`, into the
    inventory; a vCenter that cannot answer leaves them unread, with why (a warning, not a stop)."""
    from components.vcenter.faults import fault_text
    from components.vcenter.privileges import missing_privileges
    from stacks.tools.preflight.checks.privileges import VIM_KIND, targets

    wanted = targets(env)
    try:
        found = missing_privileges(
            si, env.vcenter.datacenter, {(VIM_KIND[kind], name): list(p) for (kind, name), p in wanted.items()}
        )
    except Exception as error:  # a fault or dropped connection: one warning, never a traceback
        inventory.privileges_note = f"HasPrivilegeOnEntities failed: {fault_text(error)}"
        return
    inventory.missing_privileges = {
        (kind, name): found[(VIM_KIND[kind], name)] for kind, name in wanted if (VIM_KIND[kind], name) in found
    }


def _summary(label: str, address: str, findings: list[Finding]) -> str:
    counts = {level: sum(1 for f in findings if f.level == level) for level in ("BLOCKER", "WARN", "OK")}
    verdict = "blocked" if counts["BLOCKER"] else "ready"
    return (
        f"preflight {label} against {address}: {verdict}: {counts['BLOCKER']} BLOCKER, "
        f"{counts['WARN']} WARN, {counts['OK']} OK"
    )


def run_preflight(
    env: Environment,
    settings: Settings,
    *,
    label: str,
    out: TextIO | None = None,
    login_timeout: float | None = None,
) -> int:
    """Log in, read, log out, check, print the findings and a summary line; the exit status."""
    # pyVmomi and the vCenter package load only here: `validate` and `plan` stay light.
    from pyVmomi import vim

    from components.vcenter.errors import VsphereError
    from components.vcenter.faults import fault_text
    from components.vcenter.inventory import read_inventory
    from components.vcenter.session import LOGIN_TIMEOUT_S, session
    from components.vcenter.settings import CONFIG_PASSWORD, CONFIG_SERVER, VcenterConnection
    from stacks.tools.preflight.checks import check
    from stacks.tools.preflight.checks.licensing import check_licensing
    from stacks.tools.preflight.checks.mirror import check_mirror
    from stacks.tools.preflight.checks.report import Report

    stream = out or sys.stdout
    try:
        conn = VcenterConnection.from_values(settings.values)
    except VsphereError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INVALID
    print(f"connection settings: {settings.describe()}", file=stream)
    findings: list[Finding] = []
    inventory = None
    try:
        with session(conn, timeout=login_timeout or LOGIN_TIMEOUT_S) as si:
            try:
                templates = [t for t in (env.vcenter.template, env.vcenter.gpu_template) if t]
                inventory = read_inventory(si, env.vcenter.datacenter, templates)
                read_privileges(si, env, inventory)
            except Exception as error:  # a fault or dropped connection mid-read
                findings.append(
                    Finding(
                        "BLOCKER", CONFIG_SERVER, f"reading the inventory of {conn.address} failed: {fault_text(error)}"
                    )
                )
    except VsphereError as error:  # unreachable, silent, or a refused login: one line, never a traceback
        key = CONFIG_SERVER
        message = str(error)  # names the server and what went wrong
        if isinstance(error.fault, vim.fault.InvalidLogin):
            key = CONFIG_PASSWORD
            message = (
                f"vCenter {conn.address} refused the login of user {conn.user!r} ({fault_text(error.fault)}); "
                f"check vsphere:password (from {settings.origin.get(CONFIG_PASSWORD, '?')}) and vsphere:user"
            )
        findings.append(Finding("BLOCKER", key, message))
    except Exception as error:  # TLS, DNS, anything else from the login
        findings.append(
            Finding("BLOCKER", CONFIG_SERVER, f"cannot connect to vCenter {conn.address}: {fault_text(error)}")
        )
    if inventory is not None and not findings:
        findings = check(env, inventory, stack=label, user=conn.user)
    # The vGPU license service is not in vCenter: checked whatever vCenter answered.
    licensing = Report()
    check_licensing(env, licensing)
    # Nor is the mirror: what the nodes pull at their first boot, asked with the trust they get.
    check_mirror(env, licensing)
    findings += licensing.findings
    for finding in findings:
        print(finding.render(), file=stream)
    print(_summary(label, conn.address, findings), file=stream)
    return EXIT_BLOCKED if any(f.level == "BLOCKER" for f in findings) else EXIT_OK
