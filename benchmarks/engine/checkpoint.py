"""`python -m benchmarks.engine.checkpoint`: what one checkpoint save costs, per backend.

On a self-managed (DIY) backend the engine writes the whole state after every snapshot mutation,
and every step makes at least two (pulumi/pulumi pkg/backend/snapshot.go: `mutate` is "the
serialization point": one goroutine persists each mutation and the step waits for it; a step's
`BeginMutation` and its `End` each mutate). A save marshals the checkpoint as indented JSON,
copies the old stack file to `.bak` and writes the new one (pkg/backend/diy/state.go,
`saveCheckpoint`). `PULUMI_SKIP_CHECKPOINTS=true` (with `PULUMI_EXPERIMENTAL=true` before v3.104.0,
pulumi/pulumi#15318; sdk/go/common/env/env.go:
"skip saving state checkpoints and only save the final deployment") leaves one save at the end.

Measured here, on our plan's state at two sizes (`state_size.py`):
- marshal: the engine's own way, in Go (`checkpoint_save/main.go`: `json.MarshalIndent`, four spaces);
- file://: the Go helper's `.bak` copy and write to a local directory;
- s3://: the same bytes to an S3 API served on loopback by moto's server (PyPI `moto[server]`):
  CopyObject to `.bak`, then PutObject, through boto3.
Each as a line `ms = fixed + per_mb x MB`, which the deployment model reads from
`benchmarks/engine/checkpoint_cost.json` (`--write`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from benchmarks.engine import processes
from benchmarks.engine.state_size import bytes_per_type, checkpoint, state_entry
from stacks import PROJECT_DIR

SAVER = PROJECT_DIR / "build" / "checkpoint-save"
MEASURED = Path(__file__).with_name("checkpoint_cost.json")
MB = 1_000_000


def build_saver() -> Path:
    """Build the Go helper (stdlib only, GOPATH mode, no network) if it is missing or older."""
    source = Path(__file__).with_name("checkpoint_save") / "main.go"
    if SAVER.exists() and SAVER.stat().st_mtime >= source.stat().st_mtime:
        return SAVER
    if shutil.which("go") is None:
        raise SystemExit("checkpoint: needs Go to build build/checkpoint-save (apt-get install golang-go)")
    env = {**os.environ, "GO111MODULE": "off", "GOCACHE": str(PROJECT_DIR / "build" / ".gocache")}
    # GOPATH mode builds a package given as a path relative to the current folder, not an absolute one.
    package = "./" + source.parent.relative_to(PROJECT_DIR).as_posix()
    subprocess.run(["go", "build", "-o", str(SAVER), package], check=True, env=env, cwd=PROJECT_DIR)
    return SAVER


def go_save(state_file: Path, out_dir: str, repeat: int) -> dict[str, float]:
    result = subprocess.run(
        [str(build_saver()), str(state_file), out_dir, str(repeat)], check=True, capture_output=True, text=True
    )
    return json.loads(result.stdout)


def s3_write_ms(payload: bytes, repeat: int) -> float:
    """The fastest of `repeat` saves' I/O on an S3 API (CopyObject to `.bak`, then PutObject), in ms:
    on a shared machine noise only ever adds time."""
    import boto3  # only this measurement needs it

    port = processes.free_port()
    url = f"http://127.0.0.1:{port}"
    # moto's server says where it listens on stderr, through werkzeug: wait for the port instead.
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    processes.wait_for_port(port, server)
    try:
        s3 = boto3.client(
            "s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="bench", aws_secret_access_key="bench"
        )
        s3.create_bucket(Bucket="state")
        key = ".pulumi/stacks/vsphere-gpu-cluster/w.json"
        s3.put_object(Bucket="state", Key=key, Body=payload)
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            s3.copy_object(Bucket="state", Key=key + ".bak", CopySource={"Bucket": "state", "Key": key})
            s3.put_object(Bucket="state", Key=key, Body=payload)
            times.append((time.perf_counter() - started) * 1000)
        return min(times)
    finally:
        processes.stop(server)


def measure(sizes: Sequence[int], repeat: int) -> dict[str, Any]:
    from benchmarks.deploy_time import plan_resources  # imports the program's world

    points = []
    per_type: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for workers in sizes:
            resources = plan_resources(workers, linked=True)
            per_type = bytes_per_type(resources)
            state_file = Path(tmp) / f"state-{workers}.json"
            state_file.write_text(json.dumps(checkpoint([state_entry(r) for r in resources]), default=str))
            marshal = go_save(state_file, "-", repeat)
            out = Path(tmp) / f"out-{workers}"
            out.mkdir()
            on_file = go_save(state_file, str(out), repeat)
            payload = (out / "stack.json").read_bytes()
            point = {
                "workers": workers,
                "resources": len(resources),
                "bytes": int(marshal["bytes"]),
                "marshalMs": marshal["marshal_ms"],
                "fileWriteMs": on_file["write_ms"],
                "s3WriteMs": round(s3_write_ms(payload, repeat), 2),
            }
            print(json.dumps(point), flush=True)
            points.append(point)
    return {"points": points, "bytesPerType": per_type}


def fit(points: Sequence[dict[str, Any]], field: str) -> dict[str, float]:
    """`ms = fixed + per_mb x MB` through the smallest and the largest state measured."""
    low, high = points[0], points[-1]
    per_mb = (high[field] - low[field]) / ((high["bytes"] - low["bytes"]) / MB)
    return {"fixedMs": round(max(0.0, low[field] - per_mb * low["bytes"] / MB), 3), "perMbMs": round(per_mb, 3)}


def document(found: dict[str, Any], command: str) -> dict[str, Any]:
    points = found["points"]
    return {
        "date": datetime.date.today().isoformat(),
        "command": command,
        "pulumiSdk": version("pulumi"),
        "moto": version("moto"),
        "go": subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip(),
        "machine": f"{os.cpu_count()} CPUs ({platform.machine()}), {platform.system()} {platform.release()}",
        "marshal": fit(points, "marshalMs"),
        "file": fit(points, "fileWriteMs"),
        "s3": fit(points, "s3WriteMs"),
        "points": points,
        "bytesPerType": found["bytesPerType"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.engine.checkpoint", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--sizes", default="4,64", help="GPU workers of the states measured (the first and last fit the line)"
    )
    parser.add_argument("--repeat", type=int, default=7, help="saves per state and backend (the fastest is kept)")
    parser.add_argument("--write", type=Path, help=f"store the figures as JSON (the model reads {MEASURED.name})")
    args = parser.parse_args(argv)
    sizes = sorted({int(n) for n in args.sizes.split(",") if n.strip()})
    if len(sizes) < 2:
        parser.error("--sizes needs two sizes at least (a line through them)")
    found = measure(sizes, args.repeat)
    command = "python -m benchmarks.engine.checkpoint " + " ".join(argv if argv is not None else sys.argv[1:])
    result = document(found, command.strip())
    for backend in ("marshal", "file", "s3"):
        line = result[backend]
        print(f"{backend}: {line['fixedMs']} ms + {line['perMbMs']} ms per MB")
    if args.write:
        args.write.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
