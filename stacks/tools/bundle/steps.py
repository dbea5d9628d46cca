"""The bundle's two sides as commands: fetch (a machine with the internet) and load (inside the
site). Each step is an argv list, an image copy or a download, so `--dry-run` prints exactly what
would run. Images copy in parallel (independent), through skopeo: `oci-archive:` is an OCI layout in
one tar file (containers-transports(5)), the form that crosses an air gap as a file.

Every step runs even when one fails, and `execute` returns every failure, so an operator sees all
that went wrong at once (not the first image only)."""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from subprocess import run

from stacks.tools.bundle.contents import BundleContents

PARALLEL_COPIES = 4
PART = ".part"
"""Suffix of what is being written: an archive or download takes its name only once complete, so a
fetch that stops leaves no file that looks carried."""


@dataclass(frozen=True)
class Download:
    url: str
    path: Path
    sha256: str | None = None

    def __str__(self) -> str:
        return f"download {self.url} -> {self.path}" + (f" (sha256 {self.sha256})" if self.sha256 else "")


@dataclass(frozen=True)
class ImageCopy:
    """One `skopeo copy`. Fetch: into `archive` (written under `.part`, renamed when complete).
    Load: out of the archive with `--preserve-digests` (skopeo refuses a copy that would change
    the digest) and `--digestfile`, whose digest must be `digest`, the one bundle.json records."""

    argv: tuple[str, ...]
    archive: Path | None = None
    digest: str | None = None

    def __str__(self) -> str:
        return " ".join(self.argv)


Step = Sequence[str] | Download | ImageCopy


def fetch_steps(contents: BundleContents, out: Path, *, skopeo: str = "skopeo") -> list[Step]:
    steps: list[Step] = [
        ImageCopy(
            (skopeo, "copy", "--all", f"docker://{i.source}", f"oci-archive:{out / i.archive}{PART}"),
            archive=out / i.archive,
        )
        for i in contents.images
    ]
    steps += [Download(f.source, out / f.path, f.sha256) for f in contents.files]
    steps += [Download(p.url, out / p.path) for p in contents.plugins]
    steps.append(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--require-hashes",
            "-r",
            str(out / contents.requirements),
            "-d",
            str(out / contents.wheels),
        ]
    )
    return steps


def load_steps(
    contents: BundleContents, bundle: Path, *, cert_dir: Path | None, images_only: bool, skopeo: str = "skopeo"
) -> list[Step]:
    trust = ("--dest-cert-dir", str(cert_dir)) if cert_dir else ()
    steps: list[Step] = [
        ImageCopy(
            (
                skopeo,
                "copy",
                "--all",
                "--preserve-digests",
                *trust,
                f"oci-archive:{bundle / i.archive}",
                f"docker://{i.dest}",
            ),
            digest=i.digest,
        )
        for i in contents.images
    ]
    if images_only:
        return steps
    steps += [
        ["pulumi", "plugin", "install", "resource", p.name, p.version, "--file", str(bundle / p.path)]
        for p in contents.plugins
    ]
    steps.append(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--find-links",
            str(bundle / contents.wheels),
            "--require-hashes",
            "-r",
            str(bundle / contents.requirements),
        ]
    )
    return steps


def describe(step: Step) -> str:
    return str(step) if isinstance(step, Download | ImageCopy) else " ".join(step)


def _download(step: Download) -> None:
    step.path.parent.mkdir(parents=True, exist_ok=True)
    part = step.path.with_name(step.path.name + PART)
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


def _copy_image(step: ImageCopy) -> None:
    if step.archive is not None:
        step.archive.parent.mkdir(parents=True, exist_ok=True)
        part = step.archive.with_name(step.archive.name + PART)
        part.unlink(missing_ok=True)  # what a stopped copy left is never taken for a finished one
        _command(step.argv)
        part.replace(step.archive)
        return
    with tempfile.TemporaryDirectory() as scratch:
        digestfile = Path(scratch) / "digest"
        _command([*step.argv[:2], "--digestfile", str(digestfile), *step.argv[2:]])
        pushed = digestfile.read_text().strip()
    if step.digest is not None and pushed != step.digest:
        raise OSError(f"{step}: the registry stored digest {pushed}, bundle.json records {step.digest}")


def _run_step(step: Step) -> None:
    if isinstance(step, ImageCopy):
        _copy_image(step)
    elif isinstance(step, Download):
        _download(step)
    else:
        _command(step)


def execute(steps: list[Step], *, log: Callable[[str], None]) -> list[str]:
    """Run every step: image copies `PARALLEL_COPIES` at a time (independent of each other), the
    rest in order. Returns each failure's message (empty when all ran)."""
    failures: list[str] = []

    def attempt(step: Step) -> None:
        try:
            _run_step(step)
        except OSError as error:  # urllib's URLError and HTTPError are OSErrors
            failures.append(str(error) if not isinstance(step, Download) else f"{step}: {error}")
            return
        log(describe(step))

    with ThreadPoolExecutor(PARALLEL_COPIES) as pool:
        list(pool.map(attempt, [s for s in steps if isinstance(s, ImageCopy)]))
    for step in steps:
        if not isinstance(step, ImageCopy):
            attempt(step)
    return failures
