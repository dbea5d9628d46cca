"""`python -m stacks init NAME`: write Pulumi.NAME.yaml from what the site's vCenter has.

Logs in with a read-only account (VSPHERE_SERVER, VSPHERE_USER, VSPHERE_PASSWORD and
VSPHERE_ALLOW_UNVERIFIED_SSL from the environment, as every run of this project brings its
credentials; `--server`/`--insecure` may name the vCenter instead), reads the inventory preflight
reads (`components.vcenter.inventory.read_inventory`), logs out, and writes a stack file that
validates: the GPU hosts of one cluster, each one's RDMA vmnic, the vGPU profile that fills each
host's GPUs, the datastore and the templates, each with why; the addresses, the control plane's size
and the Kubernetes version marked `DECIDE:` for you.

Refuses, one line per problem, what cannot carry the cluster: a GPU host without an RDMA-capable
NIC, a host with GPUs of two boards, no GPU host at all (leave hosts out with --hosts).

Exit status: 0 when written, 1 when vCenter could not be read or the estate cannot carry a stack,
2 on bad arguments or missing credentials (nothing written).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.k8s.facts import DNS_LABEL
from stacks import PROJECT_DIR

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_INVALID = 2


def register(subparsers: Any) -> None:
    """Add the `init` subcommand to `python -m stacks`."""
    from stacks.tools.command_help import command_parser

    parser = command_parser(
        subparsers,
        "init",
        summary="write Pulumi.NAME.yaml from the site's vCenter (read-only): hosts, RDMA NICs, vGPU profiles, datastore",
        description=__doc__,
        needs="vcenter",
        exit_statuses=None,  # the module docstring's own paragraph
    )
    parser.add_argument("stack", help="the new stack's name: writes Pulumi.STACK.yaml")
    parser.add_argument("--out", help="write this file instead of Pulumi.STACK.yaml in the project")
    parser.add_argument("--force", action="store_true", help="overwrite the file if it exists")
    parser.add_argument("--server", help="vCenter address (default: env VSPHERE_SERVER)")
    parser.add_argument("--insecure", action="store_true", default=None, help="do not verify vCenter's TLS certificate")
    parser.add_argument("--datacenter", help="the datacenter (default: the only one)")
    parser.add_argument("--cluster", help="the compute cluster (default: the only one with GPU hosts)")
    parser.add_argument("--hosts", help="comma-separated host names to use (default: every GPU host of the cluster)")
    parser.add_argument("--datastore", help="the datastore (default: the accessible one with the most free space)")
    parser.add_argument("--network", help="the VMs' management port group (default: 'VM Network' or the first)")
    parser.set_defaults(func=cmd_init)


def connection_values(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The `vsphere:*` values to log in with, and what is missing (each with the variable to set)."""
    from components.vcenter.settings import (
        CONFIG_ALLOW_UNVERIFIED_SSL,
        CONFIG_PASSWORD,
        CONFIG_SERVER,
        CONFIG_USER,
        ENV_FALLBACKS,
    )

    values = {key: environ[var] for key, var in ENV_FALLBACKS.items() if environ.get(var)}
    if args.server:
        values[CONFIG_SERVER] = args.server
    if args.insecure:
        values[CONFIG_ALLOW_UNVERIFIED_SSL] = "true"
    missing = []
    for key in (CONFIG_SERVER, CONFIG_USER, CONFIG_PASSWORD):
        if key not in values:
            fix = "export it or pass --server" if key == CONFIG_SERVER else "export it (a read-only account is enough)"
            missing.append(f"{ENV_FALLBACKS[key]} is not set: {fix}")
    return values, missing


def cmd_init(args: argparse.Namespace) -> int:
    if not DNS_LABEL.match(args.stack):
        print(
            f"error: {args.stack!r} cannot be a stack name here: lowercase letters, digits and '-' "
            "(it names the environment, its VMs and its switch)",
            file=sys.stderr,
        )
        return EXIT_INVALID
    path = Path(args.out) if args.out else PROJECT_DIR / f"Pulumi.{args.stack}.yaml"
    if path.exists() and not args.force:
        print(f"error: {path} exists; pass --force to overwrite it, or choose another name", file=sys.stderr)
        return EXIT_INVALID
    values, missing = connection_values(args, os.environ)
    if missing:
        for line in missing:
            print(f"error: {line}", file=sys.stderr)
        return EXIT_INVALID
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()] if args.hosts else None
    return write_stack(args.stack, path, values, args=args, hosts=hosts)


def write_stack(
    name: str, path: Path, values: Mapping[str, str], *, args: argparse.Namespace, hosts: list[str] | None
) -> int:
    from components.vcenter.errors import VsphereError
    from components.vcenter.settings import VcenterConnection
    from stacks.tools.init.document import render
    from stacks.tools.init.estate import EstateRefused, choose
    from stacks.tools.init.reader import ReadFailed, read_estate

    try:
        conn = VcenterConnection.from_values(values)
    except VsphereError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INVALID
    try:
        inventory = read_estate(conn, args.datacenter)
        choices = choose(inventory, cluster=args.cluster, hosts=hosts, datastore=args.datastore, network=args.network)
    except (ReadFailed, EstateRefused) as error:
        problems = error.problems if isinstance(error, EstateRefused) else [str(error)]
        for line in problems:
            print(f"error: {line}", file=sys.stderr)
        print(f"{len(problems)} problem(s): nothing written", file=sys.stderr)
        return EXIT_REFUSED
    text = render(name, choices, server=str(values["vsphere:vsphereServer"]), insecure=not conn.verify_ssl)
    path.write_text(text, encoding="utf-8")
    print(
        f"wrote {path}: {len(choices.hosts)} GPU hosts of {choices.cluster!r}, {choices.gpus_per_worker} x "
        f"{choices.profile} per worker, datastore {choices.datastore!r}"
    )
    print(f"next: set the lines marked DECIDE (addresses), then `python -m stacks validate {name}`")
    return EXIT_OK
