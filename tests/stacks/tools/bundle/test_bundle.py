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
from stacks.tools.bundle.contents import BundleContents, CarriedFile, ImageArchive
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
    # The wheels of the hash-pinned lock, each file checked against it (issue 53 item 4).
    assert planned.splitlines()[-1].endswith(
        f"-m pip download --require-hashes -r {tmp_path / 'b'}/requirements.lock -d {tmp_path / 'b'}/wheels"
    )
    assert not (tmp_path / "b").exists()  # a dry run fetches nothing


def test_fetch_without_a_mirror_is_refused_by_key(tmp_path: Path) -> None:
    code, _, err = _cli("bundle", "fetch", "dev", "--file", str(_stack_file(tmp_path, mirror=False)), "--out", "b")
    assert code == 2
    assert err.startswith("vsphere-gpu-cluster:environment.mirror.registry: not set")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from open_site(tmp_path_factory.mktemp("site"))


def _fetch_in_site(site: Site, contents: BundleContents, bundle: Path) -> subprocess.CompletedProcess[str]:
    """The connected side's fetch (stacks.tools.bundle.fetch.fetch_into) inside the namespace,
    with an empty lock: no package index there, and pip downloads nothing for no requirement."""
    bundle.mkdir()
    (bundle.parent / "plan.json").write_text(json.dumps(contents.to_json()))
    (bundle.parent / "empty.lock").write_text("")
    fetch = (
        "import json, sys; from pathlib import Path; from stacks.tools.bundle.contents import BundleContents;"
        "from stacks.tools.bundle.fetch import fetch_into;"
        "c = BundleContents.from_json(json.loads(Path(sys.argv[1]).read_text()));"
        "_, failures = fetch_into(c, Path(sys.argv[2]), lock=Path(sys.argv[3]), log=print);"
        "print(*failures, sep='\\n', file=sys.stderr); sys.exit(1 if failures else 0)"
    )
    trust = {**os.environ, "SSL_CERT_FILE": str(site.ca)}  # Go (skopeo) and Python read it
    command = site.inside(sys.executable, "-c", fetch, str(bundle.parent / "plan.json"), str(bundle),
                          str(bundle.parent / "empty.lock"))  # fmt: skip
    return subprocess.run(command, cwd=ROOT, env=trust, capture_output=True, text=True, timeout=120)


def _contents(site: Site, upstream: list[str], files: list[CarriedFile]) -> BundleContents:
    mirror = f"{site.registry}/gpucluster"
    return BundleContents(
        images=[
            ImageArchive(source=source, dest=f"{mirror}/{source.split('/upstream/')[1]}", archive=f"images/{n}.tar")
            for n, source in enumerate(upstream)
        ],
        files=files,
        plugins=[],
    )


def test_two_hops_from_the_registry_through_archives_into_the_mirror(site: Site, tmp_path: Path) -> None:
    require_program("skopeo", "/usr/bin/skopeo", "skopeo")
    upstream = [f"{site.registry}/upstream/calico/node:v3.31.3", f"{site.registry}/upstream/pause:3.10.1"]
    site.push(upstream)
    manifest = b"kind: Namespace\n"
    served = site.files_root / "upstream" / "tigera-operator.yaml"
    served.parent.mkdir(parents=True, exist_ok=True)
    served.write_bytes(manifest)
    contents = _contents(site, upstream, [
        CarriedFile(
            source=f"{site.files_url}/upstream/tigera-operator.yaml",
            dest="https://files.site.example/gpucluster/upstream/tigera-operator.yaml",
            path="files/upstream/tigera-operator.yaml",
            sha256=hashlib.sha256(manifest).hexdigest(),
        )
    ])  # fmt: skip
    bundle = tmp_path / "bundle"
    # Hop one, on the connected side: everything fetched, bundle.json written last with the hashes.
    hop = _fetch_in_site(site, contents, bundle)
    assert hop.returncode == 0, hop.stderr
    assert (bundle / "files/upstream/tigera-operator.yaml").read_bytes() == manifest
    assert not (bundle / "bundle.plan.json").exists()
    recorded = BundleContents.from_json(json.loads((bundle / "bundle.json").read_text()))
    for image in recorded.images:
        assert image.sha256 == hashlib.sha256((bundle / image.archive).read_bytes()).hexdigest()
        # The digest as skopeo reads the archive it wrote (the manifest, or index, index.json names).
        raw = subprocess.run(["skopeo", "inspect", "--raw", f"oci-archive:{bundle / image.archive}"],
                             capture_output=True, check=True).stdout  # fmt: skip
        assert image.digest == "sha256:" + hashlib.sha256(raw).hexdigest()
    # Hop two, inside the site: `bundle load` with the site CA for the registry.
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    (cert_dir / "ca.crt").write_bytes(site.ca.read_bytes())
    load = site.inside(sys.executable, "-m", "stacks", "bundle", "load", str(bundle), "--cert-dir", str(cert_dir),
                       "--images-only")  # fmt: skip
    loaded = subprocess.run(load, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    for image in recorded.images:
        # Stored under its tag, and by the very digest bundle.json records (--preserve-digests).
        name, _, tag = image.dest.removeprefix(site.registry + "/").rpartition(":")
        for reference in (tag, image.digest):
            head = site.inside("curl", "-fsS", "-o", "/dev/null", "--cacert", str(site.ca), "-I",
                               "-H", "Accept: application/vnd.oci.image.manifest.v1+json",
                               f"https://{site.registry}/v2/{name}/manifests/{reference}")  # fmt: skip
            assert subprocess.run(head, capture_output=True).returncode == 0, f"{image.dest} is not in the mirror"
    # The same folder with one archive altered (a tar block more, still a readable archive):
    # refused before anything is copied.
    with open(bundle / recorded.images[0].archive, "ab") as altered:
        altered.write(bytes(512))
    refused = subprocess.run(load, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert f"error: image {upstream[0]}: images/0.tar has SHA-256" in refused.stderr
    assert "refused: nothing loaded" in refused.stderr


def test_a_fetch_that_stops_leaves_a_folder_load_refuses_naming_the_missing_image(site: Site, tmp_path: Path) -> None:
    require_program("skopeo", "/usr/bin/skopeo", "skopeo")
    present = f"{site.registry}/upstream/coredns:v1.12.1"
    absent = [f"{site.registry}/upstream/etcd:3.6.5-0", f"{site.registry}/upstream/kube-proxy:v1.34.2"]
    site.push([present])
    bundle = tmp_path / "bundle"
    hop = _fetch_in_site(site, _contents(site, [*absent, present], []), bundle)
    assert hop.returncode == 1
    for image in absent:  # skopeo's own words for each, not only the first
        assert f"docker://{image}" in hop.stderr
    assert (bundle / "images/2.tar").is_file() and not (bundle / "bundle.json").exists()
    for dry_run in (["--dry-run"], []):
        code, out, err = _cli("bundle", "load", str(bundle), *dry_run)
        assert code == 2
        assert out == ""
        assert "is an interrupted `bundle fetch` (no bundle.json, written last); 2 missing:" in err
        assert f"  image {absent[0]} (images/0.tar)" in err
        assert f"  image {absent[1]} (images/1.tar)" in err
        assert present not in err


def test_fetch_on_a_machine_that_reaches_nothing_says_where_to_run_it(site: Site, tmp_path: Path) -> None:
    """Inside the namespace nothing outside is reachable, as on a machine inside the site."""
    stack = _stack_file(tmp_path)
    out = tmp_path / "b"
    command = site.inside(sys.executable, "-m", "stacks", "bundle", "fetch", "dev", "--file", str(stack),
                          "--out", str(out))  # fmt: skip
    fetched = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert fetched.returncode == 1, fetched.stderr
    lines = fetched.stderr.splitlines()
    assert "error: cannot reach registry-1.docker.io:443 (" in fetched.stderr
    assert "error: cannot reach get.pulumi.com:443 (" in fetched.stderr
    assert lines[-1].startswith("error: nothing fetched: run `bundle fetch` on a machine that reaches ")
    assert "nvcr.io:443" in lines[-1] and "raw.githubusercontent.com:443" in lines[-1]
    assert not out.exists()
