"""`python -m stacks recover STACK --out import.json`: after an interrupted `pulumi up` that skipped
its checkpoints (`PULUMI_SKIP_CHECKPOINTS=true`), find in vCenter, read-only, every vSphere object
the stack's program makes (switch, port group, vmknics, VM folder, VMs, DRS groups and rules) by the
name the program gives it, and write a `pulumi import --file` document for those that exist.

The program runs under the mock runtime first (as `plan` runs it): the names and Pulumi types
are the program's own. Then it logs in to vCenter (settings as `preflight` finds them: flags, the
stack's config through the Pulumi CLI, the stack file, VSPHERE_SERVER/USER/PASSWORD), reads, and
logs out. It prints one line per resource (`import`, `absent`: not created yet, `in-state`: in
the `--state` export already), what `pulumi up` does for the project's own resources (they need
no import), the stack's template copies found, and warnings.

Then: `pulumi import --file import.json --protect=false`, and `pulumi up` (docs/deploy.md).

Exit status: 0 written; 1 when vCenter cannot be read or a resource type has no recovery rule
(the document would be incomplete; nothing is written); 2 on an invalid stack file or missing
connection settings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from stacks import PROJECT_DIR
from stacks.environment.loader import load_environment, read_stack_file
from stacks.tools.command_help import command_parser

if TYPE_CHECKING:
    from components.vcenter.settings import VcenterConnection
    from stacks.environment.loader import ConfigView
    from stacks.tools.recover.recovery import Recovery

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2


def register(subparsers: Any) -> None:
    """Add the `recover` subcommand to `python -m stacks`."""
    parser = command_parser(
        subparsers,
        "recover",
        summary="after an interrupted `pulumi up`, write a `pulumi import --file` document of what it made",
        description=__doc__ or "",
        needs="vcenter",
        exit_statuses=None,  # the description's own paragraph
    )
    parser.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml")
    parser.add_argument("--file", help="read this stack file instead (same format)")
    parser.add_argument("--out", required=True, help="where to write the import document (JSON)")
    parser.add_argument("--state", help="a `pulumi stack export` of the stack: resources already in it are skipped")
    parser.add_argument("--server", help="vCenter address (env VSPHERE_SERVER)")
    parser.add_argument("--user", help="vCenter user (env VSPHERE_USER)")
    parser.add_argument("--password", help="vCenter password (env VSPHERE_PASSWORD; prefer the environment)")
    parser.add_argument("--insecure", action="store_true", default=None, help="do not verify vCenter's TLS certificate")
    parser.set_defaults(func=cmd_recover)


def state_urns(path: Path) -> frozenset[str]:
    """URNs of a `pulumi stack export` (`deployment.resources[].urn`); OSError or ValueError when unreadable."""
    document = json.loads(path.read_text(encoding="utf-8"))
    resources = (document.get("deployment") or {}).get("resources") or []
    return frozenset(str(r["urn"]) for r in resources if isinstance(r, dict) and "urn" in r)


def cmd_recover(args: argparse.Namespace) -> int:
    from components.vcenter.errors import VsphereError
    from components.vcenter.settings import VcenterConnection
    from stacks.tools.preflight.command import connection_settings

    path = Path(args.file) if args.file else PROJECT_DIR / f"Pulumi.{args.stack}.yaml"
    view = read_stack_file(path)
    load_environment(view)  # InvalidEnvironment: every problem, exit 2 (stacks.cli)
    urns: frozenset[str] = frozenset()
    if args.state:
        try:
            urns = state_urns(Path(args.state))
        except (OSError, ValueError, KeyError, AttributeError) as error:
            print(f"error: --state {args.state}: not a `pulumi stack export` document ({error})", file=sys.stderr)
            return EXIT_INVALID
    settings = connection_settings(args, view, path)
    if settings.missing:
        print(f"error: vCenter connection settings missing for stack {args.stack!r}:", file=sys.stderr)
        print(settings.missing_message(), file=sys.stderr)
        return EXIT_INVALID
    try:
        conn = VcenterConnection.from_values(settings.values)
    except VsphereError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INVALID
    return run_recover(view, conn, stack=args.stack, out=Path(args.out), state=urns)


def run_recover(
    view: ConfigView,
    conn: VcenterConnection,
    *,
    stack: str,
    out: Path,
    state: frozenset[str] = frozenset(),
    stream: TextIO | None = None,
) -> int:
    """Run the program, read vCenter, print the report, write the document; the exit status."""
    from components.vcenter.faults import fault_text
    from components.vcenter.session import session
    from stacks.tools.plan.command import run_plan
    from stacks.tools.recover.recovery import import_document, recover

    stream = stream or sys.stdout
    env = load_environment(view)
    run = run_plan(view, stack=stack)
    try:
        with session(conn) as si:
            recovery = recover(run, env, si, stack=stack, state_urns=state)
    except Exception as error:  # unreachable, refused login, a fault mid-read: one line
        print(f"error: reading vCenter {conn.address} failed: {fault_text(error)}", file=sys.stderr)
        return EXIT_FAILED
    report(recovery, stream)
    if recovery.unclassified:
        for token in recovery.unclassified:
            print(
                f"error: resource type {token} has no recovery rule (stacks/tools/recover/kinds.py); nothing written",
                file=sys.stderr,
            )
        return EXIT_FAILED
    out.write_text(json.dumps(import_document(recovery, state), indent=2) + "\n", encoding="utf-8")
    print(
        f"wrote {out}: {len(recovery.imported)} to import; {len(recovery.absent)} not created yet; "
        f"{len(recovery.in_state)} already in the state. Next: `pulumi import --file {out} --protect=false`, "
        "then `pulumi up`",
        file=stream,
    )
    return EXIT_OK


def report(recovery: Recovery, stream: TextIO) -> None:
    for found in recovery.imported:
        print(f"import    {found.resource.type} {found.resource.name} {found.id}", file=stream)
    for resource in recovery.absent:
        print(f"absent    {resource.type} {resource.name} (not created yet: nothing to import)", file=stream)
    for resource in recovery.in_state:
        print(f"in-state  {resource.type} {resource.name} (skipped)", file=stream)
    for token, (count, note) in sorted(recovery.adopted.items()):
        print(f"no import {token} x{count}: {note}", file=stream)
    from stacks.tools.recover.kinds import TEMPLATE_COPY_NOTE

    for copy in recovery.template_copies:
        print(f"warning: template copy {copy.path} (dependents: {copy.dependents}): {TEMPLATE_COPY_NOTE}", file=stream)
