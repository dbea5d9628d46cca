"""The upstream manifests the program applies, pinned by SHA-256 (`manifests/index.json`).

Each entry records a file's upstream URL, where the pin comes from and its SHA-256. Two kinds:

- vendored (the entry has a `path`): the file sits next to the index and preview and deploy read
  it, never the network. The MPIJob CRD goes to the provider as this local file; a copy whose bytes
  no longer match is refused (`ManifestChecksumError`) before any resource is registered.
- pinned only (`"vendored": false`): Calico's `tigera-operator.yaml` is not in the repository. Its
  checksum goes into the first control-plane node's settings, and the bootstrap fetches the file
  (from `mirror.files` when set, else upstream) and refuses one that does not match.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
MANIFESTS_DIR = Path("manifests")
"""Where the index and the vendored copies live, relative to the repository (the Pulumi project) root."""
INDEX = REPO_ROOT / MANIFESTS_DIR / "index.json"

MPI_OPERATOR_CRD = "mpi-operator-crd"
CALICO_OPERATOR = "calico-tigera-operator"


class ManifestChecksumError(ValueError):
    """A vendored file whose bytes are not the ones its index entry records."""


class ManifestNotPinned(KeyError):
    """No index entry for that release."""

    def __str__(self) -> str:  # KeyError quotes its argument; this message is a sentence
        return str(self.args[0])


@dataclass(frozen=True)
class PinnedManifest:
    name: str
    version: str
    """The release the file (or its checksum) comes from."""
    releases: tuple[str, ...]
    """The releases this entry serves (the MPI Operator's 0.8.2 applies 0.8.0's CRD: same schema)."""
    path: Path | None
    """The vendored copy, relative to the repository root; None where the file is only pinned."""
    url: str
    """Where upstream publishes the file at that release."""
    sha256: str
    """Of the vendored copy, or of the upstream file where none is vendored."""
    source: str
    """Where the copy or the checksum comes from, in words."""
    operator_image: str | None = None
    """The image the manifest's operator Deployment runs (Calico), recorded with the checksum so
    `stacks images` needs no copy of the file."""

    @property
    def file(self) -> Path:
        """The vendored copy; `ManifestNotPinned` where only the checksum is recorded."""
        if self.path is None:
            raise ManifestNotPinned(
                f"{self.name} {self.version} is pinned by SHA-256 only in {MANIFESTS_DIR / 'index.json'}: "
                f"the cluster fetches {self.url}, the repository holds no copy"
            )
        return REPO_ROOT / self.path

    def verified_bytes(self) -> bytes:
        """The vendored file's bytes, after checking them against the recorded SHA-256."""
        file = self.file
        try:
            data = file.read_bytes()
        except OSError as error:
            raise ManifestChecksumError(
                f"{self.path}: vendored {self.name} {self.version} is unreadable ({error})"
            ) from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != self.sha256:
            raise ManifestChecksumError(
                f"{self.path}: SHA-256 {digest} is not the {self.sha256} that {MANIFESTS_DIR / 'index.json'} "
                f"records for {self.name} {self.version} ({self.source.split(',')[0]}); restore the file, or "
                "vendor the new release's file and update its entry"
            )
        return data


def _entry(raw: dict[str, Any]) -> PinnedManifest:
    vendored = raw.get("vendored", True)
    if vendored != ("path" in raw):
        raise ValueError(
            f"{MANIFESTS_DIR / 'index.json'}: {raw['name']} {raw['version']}: a path exactly when vendored"
        )
    return PinnedManifest(
        name=raw["name"],
        version=raw["version"],
        releases=tuple(raw.get("releases", [raw["version"]])),
        path=MANIFESTS_DIR / raw["path"] if vendored else None,
        url=raw["url"],
        sha256=raw["sha256"],
        source=raw["source"],
        operator_image=raw.get("operator_image"),
    )


@cache
def pinned_manifests() -> tuple[PinnedManifest, ...]:
    """Every entry of the index."""
    document = json.loads(INDEX.read_text())
    return tuple(_entry(raw) for raw in document["manifests"])


def pinned_releases(name: str) -> tuple[str, ...]:
    return tuple(r for m in pinned_manifests() if m.name == name for r in m.releases)


def pinned(name: str, release: str) -> PinnedManifest:
    """The entry serving `name` at `release`; `ManifestNotPinned` naming the releases there are."""
    for manifest in pinned_manifests():
        if manifest.name == name and release in manifest.releases:
            return manifest
    have = ", ".join(pinned_releases(name)) or "none"
    raise ManifestNotPinned(
        f"no recorded {name} for {release} in {MANIFESTS_DIR / 'index.json'} (recorded: {have}); add the "
        "release's entry with its URL and SHA-256"
    )
