"""containerd's view of the mirror registry: `certs.d/<host>/hosts.toml` and the site CA beside it.

containerd's CRI plugin reads a registry host's settings from `<config_path>/<host[:port]>/hosts.toml`
once `config_path` is set (containerd docs/hosts.md, "Registry Host Namespace"); a relative `ca`
is read from the host's own directory (remotes/docker/config/hosts.go `makeAbsPath` joins it to the
hosts.toml's directory), so the folder is complete in itself. `server` with `http://` is how
hosts.md spells a plain-HTTP registry. The bootstrap points `config_path` at the folder and the
sandbox image at the mirror (files/gpucluster-bootstrap.sh, configure_containerd).
"""

from __future__ import annotations

from components.k8s.node_bootstrap.paths import CONTAINERD_CERTS_DIR
from components.k8s.node_bootstrap.spec import ClusterSpec

CA_FILE_NAME = "ca.crt"


def registry_host(image_repository: str) -> str:
    """`host[:port]` of a registry prefix (`registry.site.example:5000/gpucluster`)."""
    return image_repository.split("/", 1)[0]


def render_hosts_toml(host: str, *, plain_http: bool, with_ca: bool) -> str:
    """The registry as a `[host]` with the CA, and as `server` with it too: containerd tries each
    `[host]`, then `server` with the top-level settings, so a CA in the `[host]` table alone turns
    the registry's own "not found" into "x509: certificate signed by unknown authority" on that
    second try (seen with the real containerd in tests/stacks/tools/images)."""
    scheme = "http" if plain_http else "https"
    ca = [f'ca = "{CA_FILE_NAME}"'] if with_ca and not plain_http else []
    lines = [
        "# containerd's settings for the mirror registry (vsphere-gpu-cluster, mirror.registry).",
        f'server = "{scheme}://{host}"',
        *ca,
        "",
        f'[host."{scheme}://{host}"]',
        '  capabilities = ["pull", "resolve"]',
        *(f"  {line}" for line in ca),
    ]
    return "\n".join(lines) + "\n"


def containerd_registry_files(spec: ClusterSpec) -> list[tuple[str, str]]:
    """(path, content) of containerd's files for the mirror registry; none without a mirror."""
    if not spec.image_repository:
        return []
    host = registry_host(spec.image_repository)
    folder = f"{CONTAINERD_CERTS_DIR}/{host}"
    with_ca = spec.mirror_ca_pem is not None
    files = [(f"{folder}/hosts.toml", render_hosts_toml(host, plain_http=spec.registry_plain_http, with_ca=with_ca))]
    if with_ca and not spec.registry_plain_http and spec.mirror_ca_pem:
        files.append((f"{folder}/{CA_FILE_NAME}", spec.mirror_ca_pem))
    return files
