"""Issue 42, the bootstrap's containerd step on every node: the sandbox image (kubeadm's pause, from
the mirror) and `config_path` written into the template's config for containerd 1.x (config
version 2) and 2.x (version 3), containerd restarted once; the site CA into the trust store; and a
template config without those lines stops the boot naming the fix. The real containerd 1.6 runs the
same step in tests/stacks/tools/images/test_air_gapped_first_boot.py."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from components.k8s.node_bootstrap.paths import MIRROR_CA_PATH
from components.k8s.node_bootstrap.registry import containerd_registry_files, render_hosts_toml
from tests.components.k8s.node_bootstrap.node_harness import CONTAINERD_CONFIG
from tests.components.k8s.node_bootstrap.test_bootstrap_script_runs import make_node, make_spec

MIRROR = "registry.site.example:5000/gpucluster"
CA = "-----BEGIN CERTIFICATE-----\nsite\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize(("version", "key"), [(2, "sandbox_image"), (3, "sandbox")])
def test_the_sandbox_image_and_config_path_are_written_for_either_containerd(
    tmp_path: Path, version: int, key: str
) -> None:
    node = make_node(tmp_path, "cp-2", spec=make_spec(image_repository=MIRROR, mirror_ca_pem=CA))
    node.with_containerd(version)
    assert node.boot().returncode == 0
    config = node.file("/etc/containerd/config.toml").read_text()
    assert re.search(rf'^\s*{key} = "{re.escape(MIRROR)}/pause:3\.10\.1"$', config, re.MULTILINE), config
    assert re.search(r'^\s*config_path = "/etc/containerd/certs.d"$', config, re.MULTILINE), config
    assert node.calls_of("systemctl restart containerd") == ["systemctl restart containerd"]
    assert node.calls_of("update-ca-trust") == ["update-ca-trust extract"]
    assert node.file(MIRROR_CA_PATH).read_text() == CA
    hosts = node.file("/etc/containerd/certs.d/registry.site.example:5000/hosts.toml").read_text()
    assert 'server = "https://registry.site.example:5000"' in hosts and 'ca = "ca.crt"' in hosts
    assert node.file("/etc/containerd/certs.d/registry.site.example:5000/ca.crt").read_text() == CA


def test_without_a_mirror_the_sandbox_is_kubeadms_pause_from_registry_k8s_io(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-2")
    assert node.boot().returncode == 0
    assert 'sandbox_image = "registry.k8s.io/pause:3.10.1"' in node.file("/etc/containerd/config.toml").read_text()
    assert not node.calls_of("update-ca-trust")
    assert not node.file("/etc/containerd/certs.d").exists()


def test_a_template_config_without_the_lines_stops_the_boot_with_the_fix(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-2")
    node.file("/etc/containerd/config.toml").write_text(CONTAINERD_CONFIG[2].replace("  config_path = \"\"\n", ""))
    run = node.start()
    assert run.returncode != 0
    assert "has no 'sandbox_image' or 'config_path' line: write it with 'containerd config default'" in run.output
    assert not node.calls_of("kubeadm")


def test_a_plain_http_registry_gets_no_ca_and_an_http_server() -> None:
    hosts = render_hosts_toml("registry.site.example:5000", plain_http=True, with_ca=True)
    assert 'server = "http://registry.site.example:5000"' in hosts and "ca =" not in hosts
    files = dict(containerd_registry_files(make_spec(image_repository=MIRROR, mirror_ca_pem=CA, registry_plain_http=True)))
    assert list(files) == ["/etc/containerd/certs.d/registry.site.example:5000/hosts.toml"]



def test_a_run_stopped_before_the_restart_restarts_containerd_on_the_next(tmp_path: Path) -> None:
    """The edit is on disk but containerd still runs the old config: the next start, finding
    nothing left to change, restarts it all the same."""
    spec = make_spec(image_repository=MIRROR)
    reference = make_node(tmp_path / "reference", "cp-2", spec=spec)
    assert reference.boot().returncode == 0
    restart = 1 + [call.startswith("systemctl restart containerd") for call in reference.calls].index(True)
    node = make_node(tmp_path / "node", "cp-2", spec=spec)
    node.cut_power_at(restart, "before")
    assert node.start().power_cut
    assert not node.has("containerd-restarted")
    node.restore_power()
    assert node.boot().returncode == 0
    assert node.has("containerd-restarted")


def test_the_site_ca_is_the_servers_as_well_as_the_hosts() -> None:
    """containerd tries each `[host]`, then `server` with the file's top-level settings (containerd
    docs/hosts.md): without a top-level `ca` an image the mirror lacks fails as an x509 error on
    that second try. The real pull of a missing image: test_air_gapped_first_boot.py."""
    host = "registry.site.example:5000"
    hosts = tomllib.loads(render_hosts_toml(host, plain_http=False, with_ca=True))
    assert hosts["server"] == f"https://{host}" and hosts["ca"] == "ca.crt"
    assert hosts["host"][f"https://{host}"]["ca"] == "ca.crt"

