"""The bundle's two sides as commands: fetch (a machine with the internet) and load (inside the
site). Each step is an argv list or a download, so `--dry-run` prints exactly what would run.
Images copy in parallel (independent), through skopeo: `oci-archive:` is an OCI layout in one tar
file (containers-transports(5)), the form that crosses an air gap as a file."""

from __future__ import annotations

import hashlib
import shutil
import sys
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from subprocess import run

from stacks.tools.bundle.contents import BundleContents

PARALLEL_COPIES = 4


@dataclass(frozen=True)
class Download:
    url: str
    path: Path
    sha256: str | None = None

    def __str__(self) -> str:
        return f"download {self.url} -> {self.path}" + (f" (sha256 {self.sha256})" if self.sha256 else "")


Step = Sequence[str] | Download


def fetch_steps(contents: BundleContents, out: Path, *, skopeo: str = "skopeo") -> list[Step]:
    steps: list[Step] = [
        [skopeo, "copy", "--all", f"docker://{i.source}", f"oci-archive:{out / i.archive}"] for i in contents.images
    ]
    steps += [Download(f.source, out / f.path, f.sha256) for f in contents.files]
    steps += [Download(p.url, out / p.path) for p in contents.plugins]
    steps.append(
        [sys.executable, "-m", "pip", "download", "-r", str(out / contents.requirements), "-d", str(out / contents.wheels)]
    )
    return steps


def load_steps(
    contents: BundleContents, bundle: Path, *, cert_dir: Path | None, images_only: bool, skopeo: str = "skopeo"
) -> list[Step]:
    trust = ["--dest-cert-dir", str(cert_dir)] if cert_dir else []
    steps: list[Step] = [
        [skopeo, "copy", "--all", *trust, f"oci-archive:{bundle / i.archive}", f"docker://{i.dest}"]
        for i in contents.images
    ]
    if images_only:
        return steps
    steps += [
        ["pulumi", "plugin", "install", "resource", p.name, p.version, "--file", str(bundle / p.path)]
        for p in contents.plugins
    ]
    steps.append(
        [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(bundle / contents.wheels),
         "-r", str(bundle / contents.requirements)]
    )  # fmt: skip
    return steps


def describe(step: Step) -> str:
    return str(step) if isinstance(step, Download) else " ".join(step)


def _download(step: Download) -> None:
    step.path.parent.mkdir(parents=True, exist_ok=True)
    part = step.path.with_name(step.path.name + ".part")
    with urllib.request.urlopen(step.url, timeout=300) as response, open(part, "wb") as out:
        shutil.copyfileobj(response, out)
    if step.sha256 and hashlib.sha256(part.read_bytes()).hexdigest() != step.sha256:
        part.unlink()
        raise OSError(f"{step.url} does not have the recorded SHA-256 {step.sha256}: not carried")
    part.replace(step.path)


def _command(argv: Sequence[str]) -> None:
    result = run(list(argv), capture_output=True, text=True)
    if result.returncode != 0:
        raise OSError(f"{' '.join(argv)}: {result.stderr.strip() or f'exit status {result.returncode}'}")


def _is_image_copy(step: Step) -> bool:
    return not isinstance(step, Download) and Path(step[0]).name == "skopeo"


def execute(steps: list[Step], *, log: Callable[[str], None]) -> None:
    """Image copies run `PARALLEL_COPIES` at a time (independent of each other); the rest in order."""
    copies = [s for s in steps if _is_image_copy(s)]
    for step in copies:
        assert not isinstance(step, Download)
        for word in step:
            if word.startswith("oci-archive:"):
                Path(word.removeprefix("oci-archive:")).parent.mkdir(parents=True, exist_ok=True)

    def copy(step: Step) -> None:
        assert not isinstance(step, Download)
        _command(step)
        log(describe(step))

    with ThreadPoolExecutor(PARALLEL_COPIES) as pool:
        list(pool.map(copy, copies))
    for step in steps:
        if _is_image_copy(step):
            continue
        if isinstance(step, Download):
            _download(step)
        else:
            _command(step)
        log(describe(step))
