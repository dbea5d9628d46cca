"""What goes into a site's bundle, as a pure plan: the images (`stacks images`) as OCI archives,
the files the cluster fetches, the Pulumi resource plugins and the Python wheels of the operator's
machine. The fetch side (connected) and the load side (inside the site) both read it.

Resource plugins come from Pulumi's default download location, `https://get.pulumi.com/releases/
plugins/pulumi-resource-<name>-v<version>-<os>-<arch>.tar.gz` (pulumi/pulumi PR 8785,
`buildPulumiHostedPluginURL`), at the versions requirements.txt pins for their SDK packages
(`pulumi-<name>==<version>`: the SDK asks for the plugin of its own version); the site installs
them with `pulumi plugin install resource NAME VERSION --file ARCHIVE`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from stacks.tools.images.inventory import Inventory

PLUGIN_SERVER = "https://get.pulumi.com/releases/plugins"
PINS = "requirements.txt"
"""Where the plugin versions come from (the SDK packages' pins)."""
REQUIREMENTS = "requirements.lock"
"""What the wheels install from: the hash-pinned lock (scripts/lock-requirements.sh), so pip installs
only files with one of the SHA-256s it records (`--require-hashes`), whoever altered the folder."""
_PIN = re.compile(r"^pulumi-([a-z0-9-]+)==([0-9][^\s;#]*)", re.MULTILINE)


@dataclass(frozen=True)
class ImageArchive:
    source: str
    dest: str
    archive: str
    """Path in the bundle of the OCI archive (`skopeo copy ... oci-archive:`)."""
    sha256: str | None = None
    """The archive file's SHA-256, recorded once the fetch has it (None in the plan)."""
    digest: str | None = None
    """The image's manifest (or index) digest in the archive, `sha256:...`: what `bundle load`
    pushes with `--preserve-digests` and compares with what the registry stored."""


@dataclass(frozen=True)
class CarriedFile:
    source: str
    dest: str
    path: str
    """Path in the bundle: under `files/`, laid out as under `mirror.files`."""
    sha256: str | None = None


@dataclass(frozen=True)
class Plugin:
    name: str
    version: str
    url: str
    path: str
    sha256: str | None = None
    """Recorded at fetch: Pulumi publishes no checksum beside the plugin archives."""


@dataclass(frozen=True)
class BundleContents:
    images: list[ImageArchive]
    files: list[CarriedFile]
    plugins: list[Plugin]
    built_by_you: list[str] = field(default_factory=list)
    """Images already named in the mirror (`jobs.siteImage`): built and pushed, not copied."""
    wheels: str = "wheels"
    requirements: str = REQUIREMENTS
    wheel_files: dict[str, str] = field(default_factory=dict)
    """Each file `pip download` left in `wheels`, by name, and its SHA-256."""
    requirements_sha256: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def artifacts(self) -> list[tuple[str, str, str | None]]:
        """(what, path in the bundle, recorded SHA-256) of every file `bundle load` reads."""
        return [
            *((f"image {i.source}", i.archive, i.sha256) for i in self.images),
            *((f"file {f.dest}", f.path, f.sha256) for f in self.files),
            *((f"plugin {p.name} {p.version}", p.path, p.sha256) for p in self.plugins),
            ("the lock", self.requirements, self.requirements_sha256),
            *((f"wheel {name}", f"{self.wheels}/{name}", sha) for name, sha in sorted(self.wheel_files.items())),
        ]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BundleContents:
        return cls(
            images=[ImageArchive(**i) for i in data["images"]],
            files=[CarriedFile(**f) for f in data["files"]],
            plugins=[Plugin(**p) for p in data["plugins"]],
            built_by_you=list(data.get("built_by_you", [])),
            wheels=data.get("wheels", "wheels"),
            requirements=data.get("requirements", REQUIREMENTS),
            wheel_files=dict(data.get("wheel_files", {})),
            requirements_sha256=data.get("requirements_sha256"),
        )


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def resource_plugins(requirements_text: str, *, os: str = "linux", arch: str = "amd64") -> list[Plugin]:
    """The resource plugins of the SDK packages requirements.txt pins (not `pulumi` itself)."""
    plugins = []
    for name, version in _PIN.findall(requirements_text):
        archive = f"pulumi-resource-{name}-v{version}-{os}-{arch}.tar.gz"
        plugins.append(Plugin(name=name, version=version, url=f"{PLUGIN_SERVER}/{archive}", path=f"plugins/{archive}"))
    return plugins


def file_path(dest: str, files_base: str | None) -> str:
    if files_base and dest.startswith(files_base.rstrip("/") + "/"):
        return "files/" + dest.removeprefix(files_base.rstrip("/") + "/")
    parts = urlsplit(dest)
    return f"files/{parts.netloc}{parts.path}"


def bundle_contents(inventory: Inventory, *, files_base: str | None, requirements_text: str) -> BundleContents:
    images = [
        ImageArchive(source=i.source, dest=i.dest, archive=f"images/{_safe(i.dest)}.tar")
        for i in inventory.images
        if i.source != i.dest
    ]
    built = [i.dest for i in inventory.images if i.source == i.dest]
    files = [
        CarriedFile(source=f.source, dest=f.dest, path=file_path(f.dest, files_base), sha256=f.sha256)
        for f in inventory.files
    ]
    return BundleContents(images=images, files=files, plugins=resource_plugins(requirements_text), built_by_you=built)
