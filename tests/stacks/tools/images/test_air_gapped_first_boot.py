"""Issue 42: an air-gapped first boot with real parts. For each stack, the images `python -m stacks
images STACK` prints are pushed (tiny images, exactly those names) into a real registry served over
TLS with a test CA, in a network namespace with nothing else in it; the first control-plane node's
bootstrap runs (node harness: kubeadm and the cluster's API are stand-ins) with the real containerd
answering its config dump and the real curl fetching its download from the mirror's file server;
then a private real containerd, started with the config.toml, hosts.toml and CA that boot left,
pulls through its CRI every image reference the rendered plan holds: the Kubernetes objects, the
GPU Operator chart's images, kubeadm's (control plane, etcd, pause, CoreDNS), containerd's own
sandbox, Calico's operator and what its Installation deploys. A reference the list lacks fails its
pull; one naming another host fails as an escape (and could not leave the namespace anyway).

The three stacks are this module's copies of the shipped ones (fixtures/), with the site's mirror
set; the fourth is the dev copy in GPU Operator mode, the fifth the dev copy pulling from a
registry without TLS (`mirror.plainHttp`), in a test of its own. Each boot has its own containerd (each stack's boot
writes its own config: prod's Kubernetes 1.33 runs another pause), the registries are the module's.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.k8s.addons.gpu_operator import CHART_IMAGE_SETTINGS, NFD_IMAGE, RUNNING_COMPONENTS
from components.k8s.kubeadm_pins import kubeadm_pins
from components.k8s.mirror import parse_image
from components.k8s.node_bootstrap import ClusterPki, ClusterSpec, UserDataRenderer
from components.k8s.node_bootstrap.paths import CALICO_INSTALLATION_PATH, KUBEADM_CONFIG_PATH
from components.k8s.upgrade.versions import Version
from stacks.environment.cluster_spec import cluster_spec
from stacks.environment.loader import ENVIRONMENT_KEY, LICENSE_TOKEN_KEY, ConfigView, load_environment, read_stack_file
from stacks.tools.images.inventory import calico_operator_managed, container_images
from stacks.tools.plan.command import plan_stack
from tests.components.k8s.node_bootstrap.cluster_settings import HANDOFF_SIGNER_PEM, PEM_FIELDS, TEST_ENCRYPTION_KEYS
from tests.components.k8s.node_bootstrap.node_harness import CALICO_MANIFEST, STANDIN, Node, use_real_containerd
from tests.real_parts import require_program
from tests.stacks.tools.images.site_mirror import Cri, Site, open_site, private_config

FIXTURES = Path(__file__).parent / "fixtures"


def _gpu_operator(env: dict[str, Any], registry: str) -> None:
    env["gpu"].update(mode="gpu-operator", gpuOperator={"driverRepository": f"{registry}/vgpu", "driverVersion": "550.127.05"})
    env["jobs"]["sample"]["enabled"] = False
    env["jobs"]["fabricCheck"]["enabled"] = False


STACKS = {"dev": "dev", "staging": "staging", "prod": "prod", "gpu-operator": "dev"}
VARIANTS = {**STACKS, "plain-http": "dev"}


def _view(case: str, site: Site) -> ConfigView:
    view = read_stack_file(FIXTURES / f"Pulumi.{VARIANTS[case]}.yaml")
    values = copy.deepcopy(dict(view.values))
    env = values[ENVIRONMENT_KEY]
    plain_http = case == "plain-http"
    registry = f"{site.plain_registry if plain_http else site.registry}/gpucluster"
    env["mirror"] = {"registry": registry, "files": f"{site.files_url}/files", "caBundle": site.ca.read_text()}
    if plain_http:
        env["mirror"]["plainHttp"] = True  # the registry without TLS; the files still over TLS
    env["jobs"]["siteImage"] = f"{registry}/site:25.06-1"
    secrets = set(view.secret_keys)
    if case == "gpu-operator":
        _gpu_operator(env, registry)
        secrets.add(LICENSE_TOKEN_KEY)
    return ConfigView(values=values, secret_keys=frozenset(secrets))


def _stacks_images(view: ConfigView, stack: str, folder: Path, *args: str) -> list[tuple[str, str]]:
    """`python -m stacks images STACK --file F [args]` as a user runs it: its SOURCE DEST pairs."""
    from stacks.cli import main

    document = {"config": {**view.values, **{key: {"secure": "AAAA"} for key in view.secret_keys}}}
    path = folder / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["images", stack, "--file", str(path), *args]) == 0
    return [(line.split()[0], line.split()[1]) for line in out.getvalue().splitlines()]


def _chart_images(values: dict[str, Any]) -> list[str]:
    """What the GPU Operator chart runs with these values: each running component's repository,
    image and version (the chart's defaults where the values set none), and NFD's."""
    found = []
    for path in RUNNING_COMPONENTS:
        settings: dict[str, Any] = values
        for key in path:
            settings = settings.get(key) or {}
        if settings.get("enabled") is False:
            continue
        repository, image, tag = CHART_IMAGE_SETTINGS[path]
        found.append(f"{settings.get('repository', repository)}/{settings.get('image', image)}:{settings.get('version', tag)}")
    nfd = (values.get("node-feature-discovery") or {}).get("image") or {}
    default = parse_image(NFD_IMAGE)
    found.append(f"{nfd.get('repository', default.registry + '/' + default.path)}:{nfd.get('tag', default.tag)}")
    return found


def _plan_references(view: ConfigView, stack: str, out: Path) -> set[str]:
    plan_stack(view, stack=stack, out_dir=out)
    documents = [d for p in sorted((out / "manifests").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]
    references = set(container_images(d for d in documents if isinstance(d, dict)))
    for resource in json.loads((out / "resources.json").read_text())["resources"]:
        if resource["type"] == "kubernetes:helm.sh/v4:Chart":
            references.update(_chart_images(resource["inputs"]["values"]))
    return references


def _kubeadm_references(kubeadm_config: str) -> set[str]:
    """What kubeadm pulls for this ClusterConfiguration (images.GetControlPlaneImages): the control
    plane and kube-proxy at the version, etcd at `etcd.local.imageTag` where set (else its pin:
    images.GetEtcdImage), pause at its pin, CoreDNS from dns.imageRepository."""
    [cluster] = [d for d in yaml.safe_load_all(kubeadm_config) if d and d["kind"] == "ClusterConfiguration"]
    repository, version = cluster["imageRepository"], Version.parse(cluster["kubernetesVersion"])
    pins = kubeadm_pins(version.minor)
    names = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")
    return {
        *(f"{repository}/{name}:{version.tag}" for name in names),
        f"{repository}/etcd:{cluster.get('etcd', {}).get('local', {}).get('imageTag') or pins.etcd}",
        f"{repository}/pause:{pins.pause}",
        f"{cluster['dns']['imageRepository']}/coredns:{pins.coredns}",
    }


def _written(node: Node, path: str) -> str:
    """What the node's user-data writes at `path` (the bootstrap removes its kubeadm config at the end)."""
    [content] = [f["content"] for f in yaml.safe_load(node.user_data)["write_files"] if f["path"] == path]
    return str(content)


def _calico_references(node: Node, version: str) -> set[str]:
    """The operator image of the manifest the bootstrap applied, and what the Installation's
    `registry` makes of each image the operator deploys (`<registry><path>/<name>:<tag>`)."""
    applied = node.file("/var/lib/gpucluster/tigera-operator.yaml").read_text()
    operator = set(container_images(d for d in yaml.safe_load_all(applied) if d))
    [installation] = yaml.safe_load_all(node.file(CALICO_INSTALLATION_PATH).read_text())
    registry = installation["spec"]["registry"]
    return operator | {f"{registry}calico/{name}:{version}" for name in calico_operator_managed(version)}


def _boot_init_node(view: ConfigView, site: Site, base: Path) -> Node:
    """The first control-plane node's bootstrap, with the real containerd (config dump) and the
    real curl for the mirror's files; the template's config.toml as templates/rocky9/ks.cfg writes it."""
    containerd = require_program("containerd", "/usr/bin/containerd", "containerd")
    env = load_environment(view)
    spec = cluster_spec(env, ClusterSpec)
    pki = ClusterPki(
        **{name: f"-----BEGIN TEST-----\n{name}\n-----END TEST-----\n" for name in PEM_FIELDS},
        secrets_encryption_keys=TEST_ENCRYPTION_KEYS,
    )
    renderer = UserDataRenderer(spec, token="abcdef.0123456789abcdef", ca_cert_hash="sha256:" + "0" * 64, pki_handoff_signer_pem=HANDOFF_SIGNER_PEM)
    name = spec.control_plane_nodes[0].name
    node = Node(base, renderer.render(name), name)
    node.stack_delivers_pki(spec, pki)
    default = subprocess.run([containerd, "config", "default"], capture_output=True, text=True, check=True).stdout
    node.file("/etc/containerd/config.toml").parent.mkdir(parents=True, exist_ok=True)
    node.file("/etc/containerd/config.toml").write_text(default.replace("SystemdCgroup = false", "SystemdCgroup = true"))
    bin_dir = Path(node.path)
    use_real_containerd(node, containerd)
    standins = base / "standin-bin"
    standins.mkdir()
    (standins / "curl").symlink_to(STANDIN)
    (bin_dir / "curl").unlink()
    (bin_dir / "curl").write_text(
        "#!/bin/bash\n# The mirror's files: the real curl, in the site's namespace; the cluster's API: the stand-in.\n"
        f'case "${{*: -1}}" in {site.files_url}/*) exec {" ".join(site.inside("/usr/bin/curl"))} "$@" ;; esac\n'
        f'exec {standins / "curl"} "$@"\n'
    )
    (bin_dir / "curl").chmod(0o755)
    run = node.boot()
    assert run.returncode == 0, run.output
    return node


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from open_site(tmp_path_factory.mktemp("site"))


@contextlib.contextmanager
def _node_containerd(node: Node, site: Site, folder: Path) -> Iterator[Cri]:
    """A private real containerd with the config.toml, hosts.toml and CA the node's boot left."""
    folder.mkdir()
    config = folder / "config.toml"
    config.write_text(private_config(node.file("/etc/containerd/config.toml").read_text(), node.root, folder))
    containerd = require_program("containerd", "/usr/bin/containerd", "containerd")
    process = site.start(containerd, "--config", str(config), log=f"{folder.parent.name}-containerd.log")
    try:
        cri = Cri(folder / "containerd.sock")
        cri.wait()
        yield cri
    finally:
        process.terminate()
        process.wait(timeout=30)


def _serve_calico(site: Site, url: str) -> None:
    """The harness's stand-in of Calico's file, at its mirror URL."""
    target = site.files_root / url.removeprefix(site.files_url + "/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(CALICO_MANIFEST)


def _pull_all(cri: Cri, references: set[str], registry_host: str) -> None:
    outside = sorted(r for r in references if parse_image(r).registry != registry_host)
    assert outside == [], "these pulls would escape the mirror"
    failed = {reference: error for reference in sorted(references) if (error := cri.pull(reference))}
    assert failed == {}, f"{len(failed)} of {len(references)} pulls failed"


@pytest.mark.parametrize("case", sorted(STACKS))
def test_the_first_boot_pulls_every_image_of_the_plan_from_the_mirror_alone(
    case: str, site: Site, tmp_path: Path
) -> None:
    view = _view(case, site)
    env = load_environment(view)
    assert env.mirror.registry is not None
    registry_host = env.mirror.registry.split("/")[0]

    listed = _stacks_images(view, case, tmp_path)
    escaping = [dest for _, dest in listed if parse_image(dest).registry != registry_host]
    assert escaping == [], "stacks images lists images outside the mirror"
    # jobs.siteImage is no copy (`images` leaves it out): the site builds and pushes it itself.
    assert env.jobs.site_image is not None and env.jobs.site_image not in [dest for _, dest in listed]
    site.push([*(dest for _, dest in listed), env.jobs.site_image])
    for _, dest in _stacks_images(view, case, tmp_path, "--files"):
        if dest.endswith("/tigera-operator.yaml"):
            _serve_calico(site, dest)

    node = _boot_init_node(view, site, tmp_path / "node")
    assert node.calls_of("update-ca-trust extract"), "the site CA went into the trust store"
    with _node_containerd(node, site, tmp_path / "containerd") as cri:
        sandbox = str(cri.config()["sandboxImage"])
        references = (
            _plan_references(view, case, tmp_path / "plan")
            | _kubeadm_references(_written(node, KUBEADM_CONFIG_PATH))
            | _calico_references(node, env.kubernetes.cni.version)
            | {sandbox}
        )
        _pull_all(cri, references, registry_host)
    assert sandbox == f"{registry_host}/gpucluster/pause:{kubeadm_pins(Version.parse(env.kubernetes.version).minor).pause}"
    assert os.path.getsize(node.file("/var/lib/gpucluster/tigera-operator.yaml")) > 0


def test_a_registry_without_tls_is_pulled_over_http_where_the_key_says_so(site: Site, tmp_path: Path) -> None:
    """`mirror.plainHttp`: the first boot's hosts.toml sends containerd to http:// for the
    registry (the list itself is proven above; here the node's own references are pushed)."""
    view = _view("plain-http", site)
    env = load_environment(view)
    _serve_calico(site, cluster_spec(env, ClusterSpec).calico.manifest_url)
    node = _boot_init_node(view, site, tmp_path / "node")
    hosts = node.file(f"/etc/containerd/certs.d/{site.plain_registry}/hosts.toml").read_text()
    assert f'server = "http://{site.plain_registry}"' in hosts
    with _node_containerd(node, site, tmp_path / "containerd") as cri:
        references = (
            _kubeadm_references(_written(node, KUBEADM_CONFIG_PATH))
            | _calico_references(node, env.kubernetes.cni.version)
            | {str(cri.config()["sandboxImage"])}
        )
        site.push(sorted(references), plain_http=True)
        _pull_all(cri, references, site.plain_registry)


def test_a_missing_image_is_reported_not_found_not_as_a_certificate_error(site: Site, tmp_path: Path) -> None:
    """Issue 51 item 9: containerd tries each `[host]` of hosts.toml, then `server` with the file's
    top-level settings (containerd docs/hosts.md). With the site CA only in the `[host]` table, an
    image the mirror lacks fails on that second try as "x509: certificate signed by unknown
    authority", hiding the real cause (components/k8s/node_bootstrap/registry.py)."""
    view = _view("dev", site)
    env = load_environment(view)
    assert env.mirror.registry is not None
    _serve_calico(site, cluster_spec(env, ClusterSpec).calico.manifest_url)
    node = _boot_init_node(view, site, tmp_path / "node")
    with _node_containerd(node, site, tmp_path / "containerd") as cri:
        error = cri.pull(f"{env.mirror.registry}/never-pushed:1.0")
    assert error is not None
    assert "not found" in error and "x509" not in error, error
