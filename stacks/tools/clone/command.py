"""`python -m stacks clone SRC DST`: a new environment's stack file from an existing one.

Everything that must be unique per environment is re-derived, everything else (sizes, vGPU
profiles, versions, jobs) is kept, so the new stack differs from its source only where it has to:
- names: `name`, `vm.namePrefix`, `vcenter.folder`, `vcenter.resourcePool`, the RDMA switch and
  port group: the source's name is replaced where it appears as a word (`dev-rdma-dvs` becomes
  `lab-rdma-dvs`), otherwise the new name is added (`gpu` becomes `lab-gpu`); options override;
- `rdmaNetwork.vlanId` from `--vlan` (required: a VLAN is a physical-network decision);
- addresses: every RDMA and management address moves to `--rdma-subnet` / `--mgmt-subnet` keeping
  its host offset (`192.168.0.51` in a /24 becomes `.51` of the new subnet); gateways and DNS
  servers move the same way when they were inside the old subnet; an offset that does not fit
  the new subnet is refused;
- `kubernetes.controlPlaneEndpoint`: the source's name replaced in the DNS name (an address moves
  like the others); dropped for a single control-plane node, which is its own endpoint;
- ESXi hosts: `--host-map old=new` / `--hosts FILE` rename the hosts (and the workers pinned to them);
  `--drop-host OLD` / `--add-host NEW` change their count (`stacks.tools.clone.reshape`).

Afterwards it lists every value it changed and every value it kept from the source (the vCenter,
templates, vGPU profiles, sizes...): each kept one is a claim about the new site to check.

Secrets are never copied in clear: this tool cannot decrypt `secure:` values (only Pulumi, with
the source stack's key, can) and a ciphertext is bound to its own stack's key. They are dropped
and the `pulumi config set --secret` commands that remain are printed; `--copy-secrets-from`
instead keeps the secrets `pulumi stack init DST --copy-config-from SRC` re-encrypted for DST.

A clone that would collide with any other stack file of the project, `Pulumi.<stack>.yaml`
(same switch, port group, VLAN on a switch, VM name prefix, folder, API endpoint, overlapping
subnets on one vCenter, duplicate management MACs on one network, ESXi hosts claimed twice) is
refused, with every problem at once. The planning functions are pure; `cmd_clone` does the reading and writing.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Mapping, Sequence
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import yaml

from components.k8s.facts import DNS_LABEL
from stacks import PROJECT_DIR
from stacks.environment.collisions import VCENTER_SERVER_KEY, collisions, load_others
from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, InvalidEnvironment, load_environment, read_stack_file
from stacks.environment.rules import Path as KeyPath
from stacks.environment.rules import format_path
from stacks.environment.stack_names import stack_files
from stacks.tools.clone.plan import (
    CloneOptions,
    CloneRefused,
    plan_clone,
)
from stacks.tools.clone.yaml_roundtrip import render_like_source
from stacks.tools.command_help import command_parser

# Top-level keys Pulumi writes into a stack file to find that stack's secrets key: they belong to
# the stack (not to its source), so an existing target file keeps them.
_STACK_ENCRYPTION_KEYS = ("secretsprovider", "encryptedkey", "encryptionsalt")


# ---------------------------------------------------------------------------------------------
# Reading and writing


def parse_host_map(pairs: Sequence[str], hosts_file: Path | None) -> tuple[dict[str, str], list[str]]:
    """`--hosts FILE` (YAML mapping `old: new`) then every `--host-map old=new`; problems for bad entries."""
    mapping: dict[str, str] = {}
    problems: list[str] = []
    if hosts_file is not None:
        try:
            loaded = yaml.safe_load(hosts_file.read_text(encoding="utf-8"))
        except OSError as error:
            loaded = None
            problems.append(f"--hosts {hosts_file}: cannot be read ({error.strerror})")
        except yaml.YAMLError:
            loaded = None
            problems.append(f"--hosts {hosts_file}: not valid YAML; write one `old-host: new-host` line per host")
        if isinstance(loaded, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()):
            mapping.update(loaded)
        elif loaded is not None or not problems:
            problems.append(f"--hosts {hosts_file}: must be a mapping of `old-host: new-host` lines")
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old.strip() or not new.strip():
            problems.append(f"--host-map {pair}: write it as OLD=NEW (ESXi host names as vCenter shows them)")
            continue
        mapping[old.strip()] = new.strip()
    return mapping, problems


def _flatten(value: Any, path: KeyPath = ()) -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flatten(item, (*path, key)).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _flatten(item, (*path, i)).items()}
    return {format_path("", path): value}


def changed_keys(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """`key: old -> new` lines for every leaf that differs."""
    old, new = _flatten(dict(before)), _flatten(dict(after))
    lines = []
    for key in [*old, *(k for k in new if k not in old)]:
        if old.get(key) != new.get(key):
            lines.append(f"{key}: {old.get(key, '(unset)')} -> {new.get(key, '(unset)')}")
    return lines


def kept_keys(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """`key: value` for every leaf of the config (the environment's and the other keys) the clone
    keeps as its source has it; secrets are never kept (they are dropped and listed apart)."""
    old, new = _flatten(dict(before)), _flatten(dict(after))
    return [f"{key.lstrip('.')}: {value}" for key, value in old.items() if key in new and new[key] == value]


def _existing_target(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, yaml.YAMLError) as error:
        raise InvalidEnvironment([f"{path}: exists but cannot be read as YAML ({error}); move it away"]) from None
    return document if isinstance(document, dict) else {}


def cmd_clone(args: argparse.Namespace) -> int:
    project_dir = Path(args.dir) if args.dir else PROJECT_DIR
    src, dst = args.source, args.target
    src_path, dst_path = project_dir / f"Pulumi.{src}.yaml", project_dir / f"Pulumi.{dst}.yaml"
    problems: list[str] = []
    if not DNS_LABEL.match(dst):
        problems.append(f"{dst!r}: not a valid stack/environment name; use lowercase letters, digits and '-'")
    if dst == src:
        problems.append(f"{dst!r}: the new stack must have a name other than its source's")
    existing = _existing_target(dst_path)
    if existing and not (args.force or args.copy_secrets_from):
        problems.append(f"{dst_path.name}: already exists; pass --force to overwrite it (its own secrets are kept)")
    if args.copy_secrets_from and not existing:
        problems.append(
            f"{dst_path.name}: missing; --copy-secrets-from keeps the secrets Pulumi re-encrypted for {dst}, so "
            f"first run `pulumi stack init {dst} --copy-config-from {args.copy_secrets_from}` (Pulumi decrypts "
            f"{src}'s secrets and encrypts them with {dst}'s key; this tool cannot, it never sees either key), "
            "then run this command again"
        )
    host_map, host_problems = parse_host_map(args.host_map or [], Path(args.hosts) if args.hosts else None)
    problems += host_problems
    try:
        view = read_stack_file(src_path)
        source = load_environment(view)
    except InvalidEnvironment as invalid:
        # Nothing can be derived from a source that is not valid: report it with what we have.
        raise InvalidEnvironment(
            problems + [f"{src_path.name} is not valid, fix it before cloning: {line}" for line in invalid.problems]
        ) from None

    options = CloneOptions(
        source=src,
        target=dst,
        vlan_id=args.vlan,
        rdma_subnet=args.rdma_subnet,
        mgmt_subnet=args.mgmt_subnet,
        host_map=host_map,
        name_prefix=args.name_prefix,
        folder=args.folder,
        resource_pool=args.resource_pool,
        switch_name=args.switch_name,
        port_group_name=args.port_group_name,
        control_plane_endpoint=args.control_plane_endpoint,
        pod_cidr=args.pod_cidr,
        service_cidr=args.service_cidr,
        drop_hosts=tuple(args.drop_host or ()),
        add_hosts=tuple(args.add_host or ()),
    )
    try:
        plan = plan_clone(view, source, options)
    except CloneRefused as refused:
        raise InvalidEnvironment(problems + refused.problems) from None

    # The result must validate on its own; its secrets count as present (they are set next).
    new_view = ConfigView(values=plan.config, secret_keys=view.secret_keys)
    try:
        new_env = load_environment(new_view)
    except InvalidEnvironment as invalid:
        raise InvalidEnvironment(
            problems + [f"{dst_path.name} would be invalid: {line}" for line in invalid.problems]
        ) from None
    others, other_problems = load_others(stack_files(project_dir), exclude={dst})
    server = plan.config.get(VCENTER_SERVER_KEY)
    found = collisions(dst_path.name, new_env, str(server) if server else None, others)
    problems += other_problems + _one_line_for_taken_hosts(found, source.hosts, host_map, args, dst_path.name)
    if problems:
        raise InvalidEnvironment(problems)

    existing_config = existing.get("config") if isinstance(existing.get("config"), dict) else {}
    kept = {
        key: value
        for key, value in (existing_config or {}).items()
        if key in view.secret_keys and isinstance(value, dict) and set(value) == {"secure"}
    }
    config = {**plan.config, **kept}
    header = (
        f"{dst}: cloned from Pulumi.{src}.yaml by\n"
        f"  python -m stacks clone {shlex.join(_header_argv(args))}\n"
        f"Unique parts re-derived (names, folder, VLAN, addresses, hosts); secrets are not copied in clear.\n"
        f"The comments below are Pulumi.{src}.yaml's: reword those that describe {src}.\n"
        f"Check it with `python -m stacks validate {dst}` and `python -m stacks plan {dst} --out build/plan/{dst}`."
    )
    keep_top = {key: existing[key] for key in _STACK_ENCRYPTION_KEYS if key in existing}
    text, styled = render_like_source(src_path.read_text(encoding="utf-8"), config, header, keep_top)
    if args.dry_run:
        print(text, end="")
    else:
        dst_path.write_text(text, encoding="utf-8")
        print(f"wrote {dst_path} (cloned from {src_path.name})")
    if not styled:
        print(
            f"note: written without {src_path.name}'s comments: ruamel.yaml is missing (pip install -r requirements-cli.txt)"
        )
    changes = changed_keys(view.values[ENVIRONMENT_KEY], plan.config[ENVIRONMENT_KEY])
    print(f"derived from {src_path.name} ({len(changes)} values changed; everything else is {src}'s):")
    for line in changes:
        print(f"  {line}")
    # What was kept is listed too: a clone of dev silently kept dev's vCenter, templates and vGPU
    # profile (issue 54 item 3); each is a value the new site may not have.
    kept_values = kept_keys(view.values, plan.config)
    print(f"kept from {src_path.name} ({len(kept_values)} values; check each is true of {dst}):")
    for line in kept_values:
        print(f"  {line}")
    for note in plan.notes:
        print(f"note: {note}")
    _print_secret_guidance(src, dst, plan.secrets_to_set, kept, args.copy_secrets_from)
    return 0


def _print_secret_guidance(
    src: str, dst: str, secret_keys: list[str], kept: Mapping[str, Any], copy_from: str | None
) -> None:
    if kept:
        print(
            f"secrets kept from the existing Pulumi.{dst}.yaml (already encrypted for {dst}): {', '.join(sorted(kept))}"
        )
    missing = [key for key in secret_keys if key not in kept]
    if not missing:
        return
    print(
        f"secrets not copied: Pulumi.{src}.yaml holds them encrypted with {src}'s key, which only Pulumi can "
        f"decrypt; set them for {dst}:"
    )
    for key in missing:
        print(f"  pulumi config set --secret --stack {dst} {key}")
    if copy_from is None:
        print(
            f"or let Pulumi re-encrypt {src}'s values: `pulumi stack init {dst} --copy-config-from {src}`, then run "
            "this clone again with `--copy-secrets-from " + src + "` (it keeps those secrets and rewrites the rest)"
        )


# ---------------------------------------------------------------------------------------------
# Command line


def _vlan(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a VLAN id (0-4094)") from None
    if not 0 <= value <= 4094:
        raise argparse.ArgumentTypeError(f"{value} is not a VLAN id (0-4094)")
    return value


def _network(text: str) -> IPv4Network:
    try:
        return IPv4Network(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 subnet like 10.50.0.0/24 ({error})") from None


def register(subparsers: Any) -> None:
    """Add `clone` to the `python -m stacks` command line."""
    clone = command_parser(
        subparsers,
        "clone",
        summary="write Pulumi.DST.yaml from Pulumi.SRC.yaml with names, VLAN, addresses and hosts re-derived",
        description=__doc__ or "",
        needs="offline",
        exit_statuses="0 when written (or, with --dry-run, printed); 2 when SRC is invalid, DST exists without "
        "--force, the clone would collide with another stack file, or an option is malformed (all problems at once).",
    )
    clone.add_argument("source", metavar="SRC", help="existing stack: reads Pulumi.SRC.yaml")
    clone.add_argument("target", metavar="DST", help="new stack: writes Pulumi.DST.yaml")
    clone.add_argument("--vlan", type=_vlan, required=True, help="VLAN id of the new RDMA port group (0-4094)")
    clone.add_argument("--rdma-subnet", type=_network, required=True, help="new RDMA subnet, e.g. 192.168.50.0/24")
    clone.add_argument("--mgmt-subnet", type=_network, required=True, help="new management subnet, e.g. 10.50.0.0/24")
    clone.add_argument(
        "--host-map", action="append", metavar="OLD=NEW", help="use ESXi host NEW where SRC uses OLD (repeatable)"
    )
    clone.add_argument("--hosts", metavar="FILE", help="YAML mapping `old-host: new-host`, one line per host")
    clone.add_argument(
        "--drop-host", action="append", metavar="HOST", help="leave out this host of SRC and its workers (repeatable)"
    )
    clone.add_argument(
        "--add-host",
        action="append",
        metavar="HOST",
        help="add this ESXi host, RDMA vmnics as SRC's last host, with a worker pinned to it (repeatable)",
    )
    clone.add_argument("--name-prefix", help="vm.namePrefix (default: SRC's with SRC replaced by DST)")
    clone.add_argument("--folder", help="vcenter.folder (default: SRC's with the SRC segment replaced)")
    clone.add_argument("--resource-pool", help="vcenter.resourcePool (default: derived, when SRC sets one)")
    clone.add_argument("--switch-name", help="rdmaNetwork.switchName (default: derived)")
    clone.add_argument("--port-group-name", help="rdmaNetwork.portGroupName (default: derived)")
    clone.add_argument("--control-plane-endpoint", help="kubernetes.controlPlaneEndpoint (default: derived)")
    clone.add_argument("--pod-cidr", type=_network, help="kubernetes.podCidr (default: SRC's)")
    clone.add_argument("--service-cidr", type=_network, help="kubernetes.serviceCidr (default: SRC's)")
    clone.add_argument(
        "--copy-secrets-from",
        metavar="STACK",
        help="after `pulumi stack init DST --copy-config-from STACK`: keep the secrets Pulumi re-encrypted in Pulumi.DST.yaml",
    )
    clone.add_argument("--force", action="store_true", help="overwrite an existing Pulumi.DST.yaml (keeps its secrets)")
    clone.add_argument("--dry-run", action="store_true", help="print the new file instead of writing it")
    clone.add_argument("--dir", help="project folder holding the Pulumi.*.yaml files (default: this project)")
    clone.set_defaults(func=cmd_clone)


_HOST_FIX = "--host-map OLD=NEW"
"""How collisions.py's host findings name their fix: each one says to map its host."""


def _one_line_for_taken_hosts(
    found: list[str], hosts: Sequence[Any], host_map: Mapping[str, str], args: argparse.Namespace, file_name: str
) -> list[str]:
    """The source's hosts that another stack holds (their vmnics, their pinned workers), as one
    problem with the whole command to run, instead of one finding per host and per worker."""
    taken = [f for f in found if _HOST_FIX in f]
    names = [host.name for host in hosts if host.name not in host_map and any(f"'{host.name}'" in f for f in taken)]
    if not names:
        return found
    argv = _header_argv(args)
    for number, name in enumerate(names, start=1):
        argv += ["--host-map", f"{name}=NEW-HOST-{number}"]
    if args.dir:
        argv += ["--dir", args.dir]
    others = sorted({f.split("collides with ", 1)[1].split(":", 1)[0] for f in taken if "collides with " in f})
    line = (
        f"{file_name} {ENVIRONMENT_KEY}.hosts: {len(names)} ESXi host(s) of Pulumi.{args.source}.yaml are in use by "
        f"{', '.join(others)} (an RDMA vmnic belongs to one switch, a pinned worker to one environment): "
        f"give {args.target} hosts of its own, one --host-map per host (NEW-HOST-n: the names vCenter shows; "
        f"or a YAML `old: new` file with --hosts FILE); run: python -m stacks clone {shlex.join(argv)}"
    )
    return [f for f in found if f not in taken] + [line]


def _header_argv(args: argparse.Namespace) -> list[str]:
    """The options that made this file, in a stable order (for the header comment)."""
    argv = [args.source, args.target, "--vlan", str(args.vlan)]
    argv += ["--rdma-subnet", str(args.rdma_subnet), "--mgmt-subnet", str(args.mgmt_subnet)]
    for pair in args.host_map or []:
        argv += ["--host-map", pair]
    for flag, values in (("--drop-host", args.drop_host), ("--add-host", args.add_host)):
        for value in values or []:
            argv += [flag, value]
    for flag, value in (
        ("--hosts", args.hosts),
        ("--name-prefix", args.name_prefix),
        ("--folder", args.folder),
        ("--resource-pool", args.resource_pool),
        ("--switch-name", args.switch_name),
        ("--port-group-name", args.port_group_name),
        ("--control-plane-endpoint", args.control_plane_endpoint),
        ("--pod-cidr", args.pod_cidr),
        ("--service-cidr", args.service_cidr),
        ("--copy-secrets-from", args.copy_secrets_from),
    ):
        if value is not None:
            argv += [flag, str(value)]
    return argv
