"""`python -m stacks retired-copies STACK [--delete]`: the template copies a rollout left behind.

A copy of the GPU template that workers still hung off when Pulumi deleted it is kept in vCenter,
renamed `<name>-retired` (components/vsphere/template_copies/replica.py); it is in no stack's
state any more. This lists the retired copies of the stack's GPU template in its datacenter, and
which VMs still hang off each (their linked clones). With `--delete` it destroys those nothing
hangs off; a copy that still has linked clones is always kept.

Connection settings as `python -m stacks preflight` finds them (its --help). Exit status: 0 when
done (nothing left to delete, or it was deleted), 1 when vCenter cannot be reached or a delete
failed, 2 on an invalid stack file or missing connection settings. Never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from stacks import PROJECT_DIR
from stacks.environment.loader import load_environment, read_stack_file
from stacks.tools.command_help import command_parser

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2


def register(subparsers: Any) -> None:
    """Add the `retired-copies` subcommand to `python -m stacks`."""
    parser = command_parser(
        subparsers,
        "retired-copies",
        summary="list the GPU template's retired copies (`-retired`) and, with --delete, remove those no VM hangs off",
        description=__doc__ or "",
        needs="vcenter",
        exit_statuses=None,  # the description's own paragraph
    )
    parser.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml")
    parser.add_argument("--file", help="read this file instead (same format)")
    parser.add_argument("--delete", action="store_true", help="destroy the retired copies no VM hangs off")
    parser.add_argument("--server", help="vCenter address (env VSPHERE_SERVER)")
    parser.add_argument("--user", help="vCenter user (env VSPHERE_USER)")
    parser.add_argument("--password", help="vCenter password (env VSPHERE_PASSWORD; prefer the environment)")
    parser.add_argument("--insecure", action="store_true", default=None, help="do not verify vCenter's TLS certificate")
    parser.set_defaults(func=cmd_retired_copies)


def cmd_retired_copies(args: argparse.Namespace) -> int:
    from stacks.tools.preflight.command import connection_settings

    path = Path(args.file) if args.file else PROJECT_DIR / f"Pulumi.{args.stack}.yaml"
    view = read_stack_file(path)
    env = load_environment(view)  # InvalidEnvironment: every problem, exit 2 (stacks.cli)
    settings = connection_settings(args, view, path)
    if settings.missing:
        print(f"error: vCenter connection settings missing for stack {args.stack!r}:", file=sys.stderr)
        print(settings.missing_message(), file=sys.stderr)
        return EXIT_INVALID
    template = env.vcenter.gpu_template or env.vcenter.template
    return run(settings.values, template=template, datacenter=env.vcenter.datacenter, delete=args.delete)


def run(values: dict[str, Any], *, template: str, datacenter: str, delete: bool, out: TextIO | None = None) -> int:
    """List (and with `delete`, remove) the retired copies of `template`; the exit status."""
    # pyVmomi loads only here: `validate` and `plan` stay light.
    from components.vcenter.errors import VsphereError
    from components.vcenter.faults import fault_text
    from components.vcenter.session import session
    from components.vcenter.settings import VcenterConnection
    from components.vsphere.template_copies.retired import delete_retired, retired_copies

    stream = out or sys.stdout
    try:
        conn = VcenterConnection.from_values(values)
    except VsphereError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INVALID
    status = EXIT_OK
    try:
        with session(conn) as si:
            copies = retired_copies(si, template, datacenter)
            for copy in copies:
                if copy.dependents:
                    hanging = ", ".join(copy.dependents[:5]) + (", ..." if len(copy.dependents) > 5 else "")
                    print(f"kept     {copy.name}: {len(copy.dependents)} VM(s) hang off it ({hanging})", file=stream)
                elif not delete:
                    print(f"unused   {copy.name}: no VM hangs off it (--delete removes it)", file=stream)
                else:
                    try:
                        delete_retired(copy)
                        print(f"deleted  {copy.name}", file=stream)
                    except VsphereError as error:
                        print(f"failed   {copy.name}: {error}", file=stream)
                        status = EXIT_FAILED
    except Exception as error:  # unreachable vCenter, refused login, a fault mid-read: one line
        print(f"error: vCenter {conn.address}: {fault_text(error)}", file=sys.stderr)
        return EXIT_FAILED
    unused = sum(1 for copy in copies if not copy.dependents)
    verb = "deleted" if delete else "unused"
    print(f"retired copies of {template!r}: {len(copies)}, {unused} {verb}", file=stream)
    return status
