"""`python -m stacks schema`: the JSON Schema of the environment, for editors."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from stacks.environment.loader import ENVIRONMENT_KEY
from stacks.environment.model import Environment
from stacks.tools.command_help import command_parser


def cmd_schema(args: argparse.Namespace) -> int:
    schema = Environment.model_json_schema(by_alias=True)
    schema["title"] = f"{ENVIRONMENT_KEY} (vsphere-gpu-cluster environment)"
    text = json.dumps(schema, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def register(commands: Any) -> None:
    schema = command_parser(
        commands,
        "schema",
        summary="JSON Schema of the environment, for editors",
        description=__doc__ or "",
        needs="offline",
        exit_statuses="0 when written; 2 when --out cannot be written or the arguments are wrong.",
    )
    schema.add_argument("--out", help="write to this file instead of stdout")
    schema.set_defaults(func=cmd_schema)
