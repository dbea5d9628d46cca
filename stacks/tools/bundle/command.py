"""`python -m stacks bundle fetch STACK --out DIR`: on a machine with the internet, everything an
air-gapped site needs in one folder: every image `stacks images` lists (OCI archives), the files
the cluster fetches (checked against their recorded SHA-256), the Pulumi resource plugins and the
Python wheels of the hash-pinned requirements.lock, with `bundle.json`, written last, saying what
is where and the SHA-256 of each file and the digest of each image. It first checks that this
machine reaches every source, and says where to run it when not.
`python -m stacks bundle load DIR`: inside the site, refuses a folder that differs from
`bundle.json` in any file or image (or has none: an interrupted fetch, naming what is missing),
prints `bundle.json`'s SHA-256 to compare with the fetch's, then copies the images into
`mirror.registry` (skopeo, digests preserved and compared), installs the plugins (`pulumi plugin
install --file`) and the wheels (`pip install --no-index --require-hashes`); `files/` is laid out
as under `mirror.files`, to serve as it is. `--dry-run` on either prints the steps (load checks first).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from stacks.environment.loader import ENVIRONMENT_KEY, InvalidEnvironment
from stacks.environment.stack_file import check_stack_file, stack_file_path
from stacks.tools.command_help import command_parser

ROOT = Path(__file__).resolve().parents[3]


def _print(line: str) -> None:
    print(line, flush=True)


def _error(line: str) -> None:
    print(f"error: {line}", file=sys.stderr, flush=True)


def cmd_fetch(args: argparse.Namespace) -> int:
    from stacks.tools.bundle.contents import PINS, REQUIREMENTS, bundle_contents
    from stacks.tools.bundle.fetch import MANIFEST, fetch_into
    from stacks.tools.bundle.integrity import sha256_file
    from stacks.tools.bundle.reach import sources, unreachable
    from stacks.tools.bundle.steps import describe, fetch_steps
    from stacks.tools.images.inventory import inventory  # the Pulumi SDK: only when listing

    path = stack_file_path(args.stack, args.file)
    view, env = check_stack_file(path, args.stack)
    if env.mirror.registry is None:
        raise InvalidEnvironment(
            [f"{ENVIRONMENT_KEY}.mirror.registry: not set, so every image is pulled from its public registry and "
             "there is nothing to carry; set it to the site's registry (docs/air-gapped.md)"]
        )  # fmt: skip
    pins = (ROOT / PINS).read_text()
    contents = bundle_contents(inventory(view, stack=args.stack), files_base=env.mirror.files, requirements_text=pins)
    out = Path(args.out)
    steps = fetch_steps(contents, out)
    for image in contents.built_by_you:
        print(f"bundle: not carried: {image} is already named in the mirror; build and push it there", file=sys.stderr)
    if args.dry_run:
        for step in steps:
            _print(describe(step))
        return 0
    hosts = sources(contents)
    if cut_off := unreachable(hosts):
        for line in cut_off:
            _error(f"cannot reach {line}")
        _error(f"nothing fetched: run `bundle fetch` on a machine that reaches "
               f"{', '.join(f'{h}:{p}' for h, p in hosts)} (the internet, or a proxy set in HTTPS_PROXY)")  # fmt: skip
        return 1
    steps, failures = fetch_into(contents, out, lock=ROOT / REQUIREMENTS, log=_print)
    if failures:
        for line in failures:
            _error(line)
        _error(f"{out} is incomplete ({len(failures)} of {len(steps)} steps failed; no {MANIFEST} written, so "
               f"`bundle load` refuses it): run `bundle fetch` again on a machine that reaches "
               f"{', '.join(f'{h}:{p}' for h, p in hosts)}")  # fmt: skip
        return 1
    _print(f"bundle: {out} holds {len(contents.images)} images, {len(contents.files)} files, "
           f"{len(contents.plugins)} plugins and the wheels; carry it in and run `python -m stacks bundle load`")  # fmt: skip
    _print(f"bundle: {MANIFEST} sha256 {sha256_file(out / MANIFEST)}: write it down apart from the folder; "
           "`bundle load` prints it to compare")  # fmt: skip
    return 0


def cmd_load(args: argparse.Namespace) -> int:
    from stacks.tools.bundle.contents import REQUIREMENTS, BundleContents
    from stacks.tools.bundle.fetch import MANIFEST, PLAN, missing_from_plan
    from stacks.tools.bundle.integrity import cert_dir_problems, problems, sha256_file
    from stacks.tools.bundle.steps import describe, execute, load_steps

    bundle = Path(args.bundle)
    manifest = bundle / MANIFEST
    if not manifest.is_file() and (bundle / PLAN).is_file():
        missing = missing_from_plan(bundle)
        _error(f"{bundle} is an interrupted `bundle fetch` (no {MANIFEST}, written last); "
               f"{len(missing)} missing:")  # fmt: skip
        for line in missing:
            print(f"  {line}", file=sys.stderr)
        _error("run `bundle fetch` again into that folder on a machine with the internet, then carry it in")
        return 2
    if not manifest.is_file():
        _error(f"{manifest} is missing: give the folder `bundle fetch` wrote")
        return 2
    contents = BundleContents.from_json(json.loads(manifest.read_text()))
    cert_dir = Path(args.cert_dir) if args.cert_dir else None
    refused = (cert_dir_problems(cert_dir) if cert_dir else []) + problems(contents, bundle)
    lock = bundle / contents.requirements
    # The carried lock's hashes are what pip checks the wheels against: one altered with bundle.json
    # would pass both, so it must also be this checkout's own (the one the tests ran with).
    if not args.images_only and lock.is_file() and sha256_file(lock) != sha256_file(ROOT / REQUIREMENTS):
        refused.append(f"the lock: {lock} is not this checkout's {REQUIREMENTS} ({ROOT / REQUIREMENTS}): run "
                       "`bundle fetch` from the same commit as the one loading it")  # fmt: skip
    if refused:
        for line in refused:
            _error(line)
        _error(f"{bundle} refused: nothing loaded")
        return 2
    _print(f"bundle: {MANIFEST} sha256 {sha256_file(manifest)}: compare it with the one `bundle fetch` printed; "
           f"every file and image matches it")  # fmt: skip
    steps = load_steps(contents, bundle, cert_dir=cert_dir, images_only=args.images_only)
    if args.dry_run:
        for step in steps:
            _print(describe(step))
        return 0
    failures = execute(steps, log=_print)
    for line in failures:
        _error(line)
    if failures:
        return 1
    if contents.files:
        _print(f"bundle: serve {bundle / 'files'} at mirror.files (its paths are the DEST paths under it)")
    return 0


def register(subparsers: Any) -> None:
    """Add `bundle fetch` and `bundle load` to the `python -m stacks` command line."""
    exits = (
        "0 when done (or, with --dry-run, printed); 2 on an invalid stack file, a stack without "
        "mirror.registry, a folder without bundle.json, or a step that failed (its command and error named)."
    )
    bundle = command_parser(
        subparsers,
        "bundle",
        summary="carry everything an air-gapped site needs in one folder (fetch outside, load inside)",
        description=__doc__ or "",
        needs="registry",
        exit_statuses=exits,
    )
    sides = bundle.add_subparsers(dest="side", required=True)
    fetch = command_parser(
        sides,
        "fetch",
        summary="on a machine with the internet: fetch into a folder",
        description="`python -m stacks bundle fetch STACK --out DIR`: fetch everything the stack needs into DIR "
        "(images as OCI archives, files, plugins, wheels) with bundle.json saying what is where.",
        needs="registry",
        exit_statuses=exits,
    )
    fetch.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml")
    fetch.add_argument("--file", help="read this file instead (same format)")
    fetch.add_argument("--out", required=True, help="the folder to fill")
    fetch.add_argument("--dry-run", action="store_true", help="print what would be fetched, fetch nothing")
    fetch.set_defaults(func=cmd_fetch)
    load = command_parser(
        sides,
        "load",
        summary="inside the site: load a fetched folder into the mirror and this machine",
        description="`python -m stacks bundle load DIR`: the images into mirror.registry (skopeo), the plugins "
        "(`pulumi plugin install --file`) and the wheels (`pip install --no-index`).",
        needs="registry",
        exit_statuses=exits,
    )
    load.add_argument("bundle", help="the folder `bundle fetch` wrote")
    load.add_argument(
        "--cert-dir", help="a folder holding the site CA (*.crt) for the registry (skopeo --dest-cert-dir)"
    )
    load.add_argument("--images-only", action="store_true", help="load the images only (not the plugins and wheels)")
    load.add_argument("--dry-run", action="store_true", help="print what would run, run nothing")
    load.set_defaults(func=cmd_load)
