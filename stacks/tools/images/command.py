"""`python -m stacks images STACK`: every image (and, with `--files`, every file) the stack needs,
in a form a mirroring tool reads.

Default output: one `SOURCE DEST` pair per line, the upstream reference and the one the stack pulls
from `mirror.registry`, for a loop over `skopeo copy docker://SOURCE docker://DEST` or
`crane copy SOURCE DEST` (docs/air-gapped.md). `--files`: one `SOURCE_URL DEST_URL` pair per line
for what the cluster fetches (download SOURCE, upload it to DEST; `--json` gives the SHA-256 the
cluster checks, where it checks one). `--json`:
both, with who runs each image, checksums, and what is not listed.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from stacks.environment.stack_file import check_stack_file, stack_file_path
from stacks.tools.command_help import command_parser

if TYPE_CHECKING:
    from stacks.tools.images.inventory import Inventory


def render_pairs(result: Inventory, *, files: bool, mirrored: bool = False) -> str:
    """SOURCE DEST per line. `mirrored` (mirror.registry set): an image whose SOURCE is its DEST
    (jobs.siteImage, named in the mirror already) is no copy, and a loop of `skopeo copy` over the
    lines would copy it onto itself; it is left out here and named on stderr to build and push."""
    rows = [(f.source, f.dest) for f in result.files] if files else [(i.source, i.dest) for i in result.images]
    if mirrored and not files:
        rows = [(source, dest) for source, dest in rows if source != dest]
    return "".join(f"{source} {dest}\n" for source, dest in rows)


def render_json(result: Inventory) -> str:
    document = {
        "images": [asdict(i) for i in result.images],
        "files": [asdict(f) for f in result.files],
        "not_listed": list(result.not_listed),
    }
    return json.dumps(document, indent=2) + "\n"


def cmd_images(args: argparse.Namespace) -> int:
    from stacks.tools.images.inventory import inventory  # the Pulumi SDK: only when listing

    path = stack_file_path(args.stack, args.file)
    view, env = check_stack_file(path, args.stack)
    result = inventory(view, stack=args.stack)
    mirrored = env.mirror.registry is not None
    sys.stdout.write(render_json(result) if args.json else render_pairs(result, files=args.files, mirrored=mirrored))
    if not args.json and not args.files:
        if env.mirror.registry is None:
            print(f"images: {path.name} sets no mirror.registry: each DEST is its SOURCE", file=sys.stderr)
        for note in result.not_listed:
            print(f"images: not listed: {note}", file=sys.stderr)
        if env.mirror.registry is not None:
            for image in result.images:
                if image.source == image.dest:  # jobs.siteImage: built for the site, not copied (not listed)
                    print(
                        f"images: not listed: {image.dest} is already named in the mirror: build and push it there",
                        file=sys.stderr,
                    )
    return 0


def register(subparsers: Any) -> None:
    """Add `images` to the `python -m stacks` command line."""
    images = command_parser(
        subparsers,
        "images",
        summary="list every image (or file) the stack needs as SOURCE DEST pairs, for skopeo/crane copy",
        description=__doc__ or "",
        needs="offline",
        exit_statuses="0 when listed; 2 on an invalid stack file.",
    )
    images.add_argument("stack", help="stack name: reads Pulumi.STACK.yaml")
    images.add_argument("--file", help="read this file instead (same format)")
    what = images.add_mutually_exclusive_group()
    what.add_argument("--files", action="store_true", help="list the files the cluster fetches instead")
    what.add_argument("--json", action="store_true", help="images and files with details, as JSON")
    images.set_defaults(func=cmd_images)
