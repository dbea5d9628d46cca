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
- ESXi hosts: `--host-map old=new` / `--hosts FILE` rename the hosts (and the workers pinned to them).

Secrets are never copied in clear: this tool cannot decrypt `secure:` values (only Pulumi, with
the source stack's key, can) and a ciphertext is bound to its own stack's key. They are dropped
and the `pulumi config set --secret` commands that remain are printed; `--copy-secrets-from`
instead keeps the secrets `pulumi stack init DST --copy-config-from SRC` re-encrypted for DST.

A clone that would collide with any other `Pulumi.*.yaml` of the project (same switch, port
group, VLAN on a switch, VM name prefix, folder, API endpoint, overlapping subnets on one vCenter,
duplicate management MACs on one network, ESXi hosts claimed twice) is refused, with every
problem at once. The planning functions are pure; `cmd_clone` does the reading and writing.
"""

from __future__ import annotations

import argparse
import copy
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any

import yaml

from components.k8s.facts import DNS_LABEL
from stacks import PROJECT_DIR
from stacks.environment.collisions import VCENTER_SERVER_KEY, collisions, load_others, stack_files
from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, InvalidEnvironment, load_environment, read_stack_file
from stacks.environment.model import Environment
from stacks.environment.rules import Path as KeyPath
from stacks.environment.rules import format_path

# Top-level keys Pulumi writes into a stack file to find that stack's secrets key: they belong to
# the stack (not to its source), so an existing target file keeps them.
_STACK_ENCRYPTION_KEYS = ("secretsprovider", "encryptedkey", "encryptionsalt")


class CloneRefused(Exception):
    """Raised with every reason the clone cannot be made."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True, kw_only=True)
class CloneOptions:
    source: str
    """The source stack's name (`Pulumi.<source>.yaml`)."""
    target: str
    """The new stack's name; also the new environment's `name`."""
    vlan_id: int
    rdma_subnet: IPv4Network
    mgmt_subnet: IPv4Network
    host_map: Mapping[str, str] = field(default_factory=dict)
    """Source ESXi host name -> the new environment's host; hosts not named keep their name."""
    name_prefix: str | None = None
    folder: str | None = None
    resource_pool: str | None = None
    switch_name: str | None = None
    port_group_name: str | None = None
    control_plane_endpoint: str | None = None
    pod_cidr: IPv4Network | None = None
    service_cidr: IPv4Network | None = None


@dataclass(frozen=True)
class ClonePlan:
    """The new stack's `config:` mapping and what the user still has to do."""

    config: dict[str, Any]
    secrets_to_set: list[str]
    """Secret keys of the source that the new stack needs set again (sorted)."""
    notes: list[str]


# ---------------------------------------------------------------------------------------------
# Pure re-derivation


def replace_word(value: str, old: str, new: str) -> str | None:
    """`value` with every whole-word `old` (not inside a longer name) replaced; None if absent."""
    pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(old)}(?![A-Za-z0-9])")
    if not pattern.search(value):
        return None
    return pattern.sub(lambda _match: new, value)


def derive_name(value: str, source: str, target: str, *, joiner: str = "-") -> str:
    """`dev-rdma-dvs` -> `lab-rdma-dvs`; a name without the source's name gets the target's in front."""
    replaced = replace_word(value, source, target)
    return replaced if replaced is not None else f"{target}{joiner}{value}"


def derive_folder(folder: str, source: str, target: str) -> str:
    """Replace the source's name in the folder path (`gpu-cluster/dev`), else add a segment for it."""
    segments = folder.strip("/").split("/")
    renamed = [replace_word(segment, source, target) for segment in segments]
    if any(segment is not None for segment in renamed):
        return "/".join(new if new is not None else old for old, new in zip(segments, renamed, strict=True))
    return "/".join([*segments, target])


def move_address(address: IPv4Address, old: IPv4Network, new: IPv4Network) -> IPv4Address:
    """The address with the same host offset in `new`; ValueError when the offset does not fit."""
    offset = int(address) - int(old.network_address)
    if not 0 <= offset < old.num_addresses:
        raise ValueError(f"{address} is not inside {old}")
    usable = range(1, new.num_addresses - 1) if new.prefixlen < 31 else range(new.num_addresses)
    if offset not in usable:
        raise ValueError(
            f"{address} is host {offset} of {old}, and {new} has host offsets "
            f"{usable.start}-{usable.stop - 1} only: pick a larger subnet or renumber this address first"
        )
    return IPv4Address(int(new.network_address) + offset)


class _Rewriter:
    """Applies changes to a copy of the raw (camelCase) environment, collecting problems."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw: dict[str, Any] = copy.deepcopy(dict(raw))
        self.problems: list[str] = []
        self.notes: list[str] = []

    def _parent(self, path: KeyPath) -> Any:
        current: Any = self.raw
        for part in path[:-1]:
            current = current[part] if isinstance(part, int) else current.setdefault(part, {})
        return current

    def set(self, path: KeyPath, value: Any) -> None:
        self._parent(path)[path[-1]] = value

    def drop(self, path: KeyPath) -> None:
        parent = self._parent(path)
        if isinstance(parent, dict):
            parent.pop(path[-1], None)

    def problem(self, path: KeyPath, message: str) -> None:
        self.problems.append(f"{format_path(ENVIRONMENT_KEY, path)}: {message}")

    def move(self, path: KeyPath, address: IPv4Address, old: IPv4Network, new: IPv4Network, option: str) -> None:
        try:
            self.set(path, str(move_address(address, old, new)))
        except ValueError as error:
            self.problem(path, f"cannot move to {option} {new}: {error}")


def plan_environment(
    source: Environment, raw: Mapping[str, Any], options: CloneOptions
) -> tuple[dict[str, Any], list[str], list[str]]:
    """The target's raw environment (the source's, with unique parts re-derived), problems, notes.

    Works on the raw mapping so the new file keeps the source's keys and order and does not
    spell out every default; `source` is the validated view of the same mapping.
    """
    src, dst = options.source, options.target
    out = _Rewriter(raw)
    out.set(("name",), dst)

    vc = source.vcenter
    out.set(("vcenter", "folder"), options.folder or derive_folder(vc.folder, src, dst))
    if vc.resource_pool is not None or options.resource_pool is not None:
        resource_pool = options.resource_pool or derive_name(vc.resource_pool or "", src, dst)
        out.set(("vcenter", "resourcePool"), resource_pool)
        out.notes.append(
            f"vcenter.resourcePool {resource_pool!r} must exist in vCenter before `pulumi up` (the program looks it up, "
            "it does not create it); pass --resource-pool to pick another"
        )
    out.set(("vm", "namePrefix"), options.name_prefix or derive_name(source.vm.name_prefix, src, dst))

    net = source.rdma_network
    out.set(("rdmaNetwork", "switchName"), options.switch_name or derive_name(net.switch_name, src, dst))
    out.set(("rdmaNetwork", "portGroupName"), options.port_group_name or derive_name(net.port_group_name, src, dst))
    out.set(("rdmaNetwork", "vlanId"), options.vlan_id)
    rdma_old, rdma_new = net.subnet, options.rdma_subnet
    out.set(("rdmaNetwork", "subnet"), str(rdma_new))
    if net.gateway is not None:
        out.move(("rdmaNetwork", "gateway"), net.gateway, rdma_old, rdma_new, "--rdma-subnet")

    mgmt = source.management_network
    mgmt_old, mgmt_new = mgmt.subnet, options.mgmt_subnet
    out.set(("managementNetwork", "subnet"), str(mgmt_new))
    out.move(("managementNetwork", "gateway"), mgmt.gateway, mgmt_old, mgmt_new, "--mgmt-subnet")
    for i, dns in enumerate(mgmt.dns_servers):
        if dns in mgmt_old:  # DNS servers elsewhere (shared resolvers) stay as they are
            out.move(("managementNetwork", "dnsServers", i), dns, mgmt_old, mgmt_new, "--mgmt-subnet")

    _rename_hosts(out, source, options)
    for i, host in enumerate(source.hosts):
        out.move(("hosts", i, "vmknicIp"), host.vmknic_ip, rdma_old, rdma_new, "--rdma-subnet")
    for pool_key, pool in (("controlPlane", source.control_plane), ("gpuWorkers", source.gpu_workers)):
        for j, node in enumerate(pool.nodes):
            out.move((pool_key, "nodes", j, "managementIp"), node.management_ip, mgmt_old, mgmt_new, "--mgmt-subnet")
            if node.rdma_ip is not None:
                out.move((pool_key, "nodes", j, "rdmaIp"), node.rdma_ip, rdma_old, rdma_new, "--rdma-subnet")

    _control_plane_endpoint(out, source, options)
    if options.pod_cidr is not None:
        out.set(("kubernetes", "podCidr"), str(options.pod_cidr))
    if options.service_cidr is not None:
        out.set(("kubernetes", "serviceCidr"), str(options.service_cidr))
    return out.raw, out.problems, out.notes


def _rename_hosts(out: _Rewriter, source: Environment, options: CloneOptions) -> None:
    known = [host.name for host in source.hosts]
    for old in options.host_map:
        if old not in known:
            out.problems.append(
                f"--host-map {old}: not a host of Pulumi.{options.source}.yaml (its hosts: {', '.join(known)})"
            )
    for i, host in enumerate(source.hosts):
        if host.name in options.host_map:
            out.set(("hosts", i, "name"), options.host_map[host.name])
    for j, node in enumerate(source.gpu_workers.nodes):
        if node.host is not None and node.host in options.host_map:
            out.set(("gpuWorkers", "nodes", j, "host"), options.host_map[node.host])


def _control_plane_endpoint(out: _Rewriter, source: Environment, options: CloneOptions) -> None:
    path: KeyPath = ("kubernetes", "controlPlaneEndpoint")
    if options.control_plane_endpoint is not None:
        out.set(path, options.control_plane_endpoint)
        return
    endpoint = source.kubernetes.control_plane_endpoint
    if endpoint is None:
        return
    if len(source.control_plane.nodes) == 1:
        out.drop(path)
        out.notes.append(
            f"kubernetes.controlPlaneEndpoint {endpoint!r} dropped: with one control-plane node the API is "
            "reached at that node's address; pass --control-plane-endpoint to set one"
        )
        return
    try:
        address: IPv4Address | None = IPv4Address(endpoint)
    except ValueError:
        address = None
    if address is not None:
        if address in source.management_network.subnet:
            out.move(path, address, source.management_network.subnet, options.mgmt_subnet, "--mgmt-subnet")
        else:
            out.problem(
                path,
                f"{endpoint} is outside managementNetwork.subnet, so it cannot be moved: pass --control-plane-endpoint",
            )
        return
    renamed = replace_word(endpoint, options.source, options.target)
    if renamed is None:
        out.problem(
            path,
            f"{endpoint!r} does not contain {options.source!r} to replace, and the new cluster must not use "
            f"{options.source}'s API endpoint: pass --control-plane-endpoint (a load-balanced DNS name or VIP)",
        )
        return
    out.set(path, renamed)
    out.notes.append(
        f"kubernetes.controlPlaneEndpoint {renamed!r}: create its DNS record and load balancer before `pulumi up`"
    )


def plan_clone(view: ConfigView, source: Environment, options: CloneOptions) -> ClonePlan:
    """The new stack's config: the source's, secrets dropped, the environment re-derived."""
    raw = view.values.get(ENVIRONMENT_KEY)
    if not isinstance(raw, Mapping):
        raise CloneRefused([f"{ENVIRONMENT_KEY}: the source must hold the environment as a YAML mapping"])
    new_env, problems, notes = plan_environment(source, raw, options)
    if problems:
        raise CloneRefused(problems)
    config = {key: (new_env if key == ENVIRONMENT_KEY else copy.deepcopy(value)) for key, value in view.values.items()}
    return ClonePlan(config=config, secrets_to_set=sorted(view.secret_keys), notes=notes)


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


def render_stack_file(config: Mapping[str, Any], header: str, keep: Mapping[str, Any] | None = None) -> str:
    """The new file: header comment, the target's own encryption keys (if any), then `config:`."""
    document: dict[str, Any] = {key: value for key, value in (keep or {}).items() if key != "config"}
    document["config"] = dict(config)
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comment + yaml.safe_dump(document, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120)


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
    problems += other_problems + collisions(dst_path.name, new_env, str(server) if server else None, others)
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
        f"Check it with `python -m stacks validate {dst}` and `python -m stacks plan {dst} --out build/plan/{dst}`."
    )
    keep_top = {key: existing[key] for key in _STACK_ENCRYPTION_KEYS if key in existing}
    text = render_stack_file(config, header, keep_top)
    if args.dry_run:
        print(text, end="")
    else:
        dst_path.write_text(text, encoding="utf-8")
        print(f"wrote {dst_path} (cloned from {src_path.name})")
    for line in changed_keys(view.values[ENVIRONMENT_KEY], plan.config[ENVIRONMENT_KEY]):
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
    clone = subparsers.add_parser(
        "clone",
        help="write Pulumi.DST.yaml from Pulumi.SRC.yaml with names, VLAN, addresses and hosts re-derived",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
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


def _header_argv(args: argparse.Namespace) -> list[str]:
    """The options that made this file, in a stable order (for the header comment)."""
    argv = [args.source, args.target, "--vlan", str(args.vlan)]
    argv += ["--rdma-subnet", str(args.rdma_subnet), "--mgmt-subnet", str(args.mgmt_subnet)]
    for pair in args.host_map or []:
        argv += ["--host-map", pair]
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
