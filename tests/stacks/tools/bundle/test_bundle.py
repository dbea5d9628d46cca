"""`python -m stacks bundle` (issue 42): the connected side's plan of what it fetches, offline, and
a two-hop transfer with real parts: real skopeo copies images out of a real registry into OCI
archives and the file server's file (checked against its SHA-256) into a folder, and `bundle load`
copies the archives into the mirror's names in the same registry, over TLS with a test CA, inside
a network namespace with nothing else in it."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from stacks.cli import main
from stacks.environment.loader import ENVIRONMENT_KEY, read_stack_file
from stacks.tools.bundle.contents import BundleContents, CarriedFile, ImageArchive, resource_plugins
from tests.real_parts import require_program
from tests.stacks.tools.images.site_mirror import ROOT, Site, open_site

FIXTURE = Path(__file__).parents[1] / "images" / "fixtures" / "Pulumi.dev.yaml"
REGISTRY = "registry.site.example:5000/gpucluster"
FILES = "https://files.site.example/gpucluster"


def _stack_file(folder: Path, *, mirror: bool = True) -> Path:
    view = read_stack_file(FIXTURE)
    values = copy.deepcopy(dict(view.values))
    env = values[ENVIRONMENT_KEY]
    if mirror:
        env["mirror"] = {"registry": REGISTRY, "files": FILES}
    env["jobs"]["siteImage"] = f"{REGISTRY}/site:25.06-1"
    document = {"config": {**values, **{key: {"secure": "AAAA"} for key in view.secret_keys}}}
    path = folder / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_fetch_plans_every_listed_image_the_files_the_plugins_and_the_wheels(tmp_path: Path) -> None:
    stack = _stack_file(tmp_path)
    code, listed, notes = _cli("images", "dev", "--file", str(stack))
    assert code == 0
    assert f"images: not listed: {REGISTRY}/site:25.06-1 is already named in the mirror: build and push it there" in notes
    pairs = [line.split() for line in listed.splitlines()]
    # A copy of the site image onto itself is no copy: not a line of the list (issue 55 item 6).
    assert [source for source, dest in pairs if source == dest] == []
    code, planned, err = _cli("bundle", "fetch", "dev", "--file", str(stack), "--out", str(tmp_path / "b"), "--dry-run")
    assert code == 0
    copies = [line.split() for line in planned.splitlines() if line.startswith("skopeo copy")]
    assert sorted(c[3].removeprefix("docker://") for c in copies) == sorted(s for s, d in pairs if s != d)
    assert all(c[4].startswith(f"oci-archive:{tmp_path / 'b' / 'images'}/") for c in copies)
    # jobs.siteImage is already the mirror's: built and pushed, not carried (docs/air-gapped.md).
    assert f"bundle: not carried: {REGISTRY}/site:25.06-1 is already named in the mirror" in err
    requirements = (ROOT / "requirements.txt").read_text()
    for name in ("vsphere", "kubernetes", "tls", "random"):
        version = next(line.split("==")[1] for line in requirements.splitlines() if line.startswith(f"pulumi-{name}=="))
        url = f"https://get.pulumi.com/releases/plugins/pulumi-resource-{name}-v{version}-linux-amd64.tar.gz"
        assert f"download {url} -> " in planned
    calico = next(line for line in planned.splitlines() if "tigera-operator.yaml" in line)
    assert calico.endswith("(sha256 23d4b023fd862741b8c0fe068d27cecd18f27edda93ecc6b4433c7faeb2b940e)")
    assert f"{tmp_path / 'b'}/files/raw.githubusercontent.com/projectcalico/calico/v3.31.3/" in calico
    assert planned.splitlines()[-1].endswith(f"-m pip download -r {tmp_path / 'b'}/requirements.txt -d {tmp_path / 'b'}/wheels")
    assert not (tmp_path / "b").exists()  # a dry run fetches nothing


def test_fetch_without_a_mirror_is_refused_by_key(tmp_path: Path) -> None:
    code, _, err = _cli("bundle", "fetch", "dev", "--file", str(_stack_file(tmp_path, mirror=False)), "--out", "b")
    assert code == 2
    assert err.startswith("vsphere-gpu-cluster:environment.mirror.registry: not set")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from open_site(tmp_path_factory.mktemp("site"))


def test_two_hops_from_the_registry_through_archives_into_the_mirror(site: Site, tmp_path: Path) -> None:
    require_program("skopeo", "/usr/bin/skopeo", "skopeo")
    upstream = [f"{site.registry}/upstream/calico/node:v3.31.3", f"{site.registry}/upstream/pause:3.10.1"]
    site.push(upstream)
    manifest = b"kind: Namespace\n"
    served = site.files_root / "upstream" / "tigera-operator.yaml"
    served.parent.mkdir(parents=True, exist_ok=True)
    served.write_bytes(manifest)
    mirror = f"{site.registry}/gpucluster"
    contents = BundleContents(
        images=[
            ImageArchive(source=source, dest=f"{mirror}/{source.split('/upstream/')[1]}", archive=f"images/{n}.tar")
            for n, source in enumerate(upstream)
        ],
        files=[
            CarriedFile(
                source=f"{site.files_url}/upstream/tigera-operator.yaml",
                dest="https://files.site.example/gpucluster/upstream/tigera-operator.yaml",
                path="files/upstream/tigera-operator.yaml",
                sha256=hashlib.sha256(manifest).hexdigest(),
            )
        ],
        plugins=[],
    )
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "bundle.json").write_text(json.dumps(contents.to_json()))
    # Hop one, on the connected side: the fetch steps of images and files (not pip: no index here).
    fetch = (
        "import sys; from pathlib import Path; from stacks.tools.bundle.contents import BundleContents;"
        "from stacks.tools.bundle.steps import execute, fetch_steps; import json;"
        "c = BundleContents.from_json(json.loads(Path(sys.argv[1], 'bundle.json').read_text()));"
        "execute([s for s in fetch_steps(c, Path(sys.argv[1])) if 'pip' not in str(s)], log=print)"
    )
    trust = {**os.environ, "SSL_CERT_FILE": str(site.ca)}  # Go (skopeo) and Python read it
    hop = subprocess.run(site.inside(sys.executable, "-c", fetch, str(bundle)), cwd=ROOT, env=trust,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert hop.returncode == 0, hop.stderr
    assert (bundle / "files/upstream/tigera-operator.yaml").read_bytes() == manifest
    assert all((bundle / i.archive).stat().st_size > 0 for i in contents.images)
    # Hop two, inside the site: `bundle load` with the site CA for the registry.
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    (cert_dir / "ca.crt").write_bytes(site.ca.read_bytes())
    load = site.inside(sys.executable, "-m", "stacks", "bundle", "load", str(bundle), "--cert-dir", str(cert_dir),
                       "--images-only")  # fmt: skip
    loaded = subprocess.run(load, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    for image in contents.images:
        name, _, tag = image.dest.removeprefix(site.registry + "/").rpartition(":")
        head = site.inside("curl", "-fsS", "-o", "/dev/null", "--cacert", str(site.ca), "-I",
                           "-H", "Accept: application/vnd.oci.image.manifest.v1+json",
                           f"https://{site.registry}/v2/{name}/manifests/{tag}")  # fmt: skip
        assert subprocess.run(head, capture_output=True).returncode == 0, f"{image.dest} is not in the mirror"


def test_load_runs_the_plugins_and_wheels_from_the_bundle(tmp_path: Path) -> None:
    contents = BundleContents(
        images=[],
        files=[],
        plugins=resource_plugins("pulumi==3.272.0\npulumi-tls==5.6.2\n"),
    )
    (tmp_path / "bundle.json").write_text(json.dumps(contents.to_json()))
    code, out, _ = _cli("bundle", "load", str(tmp_path), "--dry-run")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == (
        f"pulumi plugin install resource tls 5.6.2 --file {tmp_path}/plugins/pulumi-resource-tls-v5.6.2-linux-amd64.tar.gz"
    )
    assert lines[1].endswith(f"-m pip install --no-index --find-links {tmp_path}/wheels -r {tmp_path}/requirements.txt")
