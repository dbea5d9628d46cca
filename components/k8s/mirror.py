"""One mirror for an air-gapped site: where every image and every fetched file comes from instead.

Images keep their repository path and tag and lose their registry host:
`nvcr.io/nvidia/k8s-device-plugin:v0.20.0` becomes `<registry>/nvidia/k8s-device-plugin:v0.20.0`,
Docker Hub's `mpioperator/mpi-operator:0.8.2` becomes `<registry>/mpioperator/mpi-operator:0.8.2`.
That is the layout operators themselves produce when pointed at one registry: Calico's
Installation `registry` gives `<registry>/calico/node:<tag>` for `quay.io/calico/node:<tag>`
(tigera/operator pkg/components/references.go `GetReference`), and the GPU Operator's per-component
`repository` keeps each image's name. Files keep their host and path under the file base:
`https://raw.githubusercontent.com/a/b/f.yaml` becomes `<files>/raw.githubusercontent.com/a/b/f.yaml`.
Pure functions, no Pulumi: the wiring, `validate` and `stacks images` share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

DOCKER_HUB = "docker.io"


@dataclass(frozen=True)
class ImageName:
    """A parsed image reference: `registry/path[:tag][@digest]`."""

    registry: str
    path: str
    tag: str | None
    digest: str | None

    @property
    def reference(self) -> str:
        return (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")

    @property
    def full(self) -> str:
        """The reference with its registry written out (what `skopeo`/`crane` read)."""
        return f"{self.registry}/{self.path}{self.reference}"


def parse_image(image: str) -> ImageName:
    """Docker's reference grammar: the first component is a registry only when it has a `.` or a
    `:` or is `localhost`; otherwise the image is on Docker Hub (`library/` for one-word names)."""
    rest, _, digest = image.partition("@")
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, remainder
    else:
        registry, path = DOCKER_HUB, rest if slash else f"library/{rest}"
    name, colon, tag = path.rpartition(":")
    if not colon or "/" in tag:
        name, tag = path, ""
    return ImageName(registry=registry, path=name, tag=tag or None, digest=digest or None)


def mirrored_image(image: str, registry: str | None) -> str:
    """`image` as pulled from the mirror `registry` (a host with an optional path, no scheme);
    unchanged when there is no mirror or the image is in it already."""
    if not registry:
        return image
    prefix = registry.rstrip("/")
    if image.startswith(prefix + "/"):
        return image
    parsed = parse_image(image)
    return f"{prefix}/{parsed.path}{parsed.reference}"


def mirrored_repository(repository: str, registry: str | None) -> str:
    """An image repository without a name or tag (a Helm chart's `repository: nvcr.io/nvidia`)."""
    if not registry:
        return repository
    return mirrored_image(repository + "/x", registry).removesuffix("/x")


def mirrored_url(url: str, files: str | None) -> str:
    """`url` under the mirror's file base (`https://files.example/gpucluster`); unchanged when
    there is no mirror or the URL is under it already."""
    if not files:
        return url
    base = files.rstrip("/")
    if url.startswith(base + "/"):
        return url
    parts = urlsplit(url)
    return f"{base}/{parts.netloc}{parts.path}"


def in_registry(image: str, registry: str) -> bool:
    return image.startswith(registry.rstrip("/") + "/")
