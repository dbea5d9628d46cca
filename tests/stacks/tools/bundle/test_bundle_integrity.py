"""`bundle load` trusts nothing the carried folder says about itself but `bundle.json` (issue 53
item 4), and refuses a folder a fetch did not finish (issue 55 item 3): every file's SHA-256 and
every image's digest checked before anything runs, `--dry-run` included; wheels installed with
`--require-hashes` from the lock; a `--cert-dir` skopeo would refuse named before skopeo runs.

The archives here are OCI layouts in one tar, written as image-spec's image-layout.md lays them
out (`oci-layout`, `index.json`, `blobs/sha256/...`), the form `skopeo copy ... oci-archive:`
writes; test_bundle.py's two-hop test reads skopeo's own."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from stacks.cli import main

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
ROOT = Path(__file__).resolve().parents[4]


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tar(entries: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def oci_archive(path: Path, payload: str) -> str:
    """One image whose one layer holds `payload`, as an OCI archive at `path`; its digest."""
    layer = gzip.compress(_tar({"hello": payload.encode()}), mtime=0)
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + _sha(gzip.decompress(layer))]}}).encode()  # fmt: skip
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + _sha(config),
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:" + _sha(layer),
                    "size": len(layer)}],
    }).encode()  # fmt: skip
    digest = "sha256:" + _sha(manifest)
    index = {"schemaVersion": 2, "manifests": [{"mediaType": MANIFEST_TYPE, "digest": digest, "size": len(manifest)}]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_tar({
        "oci-layout": b'{"imageLayoutVersion": "1.0.0"}',
        "index.json": json.dumps(index).encode(),
        **{f"blobs/sha256/{_sha(blob)}": blob for blob in (layer, config, manifest)},
    }))  # fmt: skip
    return digest


def _write(path: Path, data: bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return _sha(data)


def complete_bundle(folder: Path) -> dict[str, Any]:
    """A folder as a finished fetch leaves it: two images, a file, a plugin, the lock, a wheel;
    bundle.json recording each SHA-256 (and each image's digest). Returns bundle.json's data."""
    images = []
    for name in ("calico_node", "pause"):
        archive = f"images/{name}.tar"
        digest = oci_archive(folder / archive, f"{name} layer\n")
        images.append({"source": f"upstream.example/{name}:v1", "dest": f"registry.site.example:5000/{name}:v1",
                       "archive": archive, "sha256": _sha((folder / archive).read_bytes()), "digest": digest})  # fmt: skip
    operator = "files/raw.githubusercontent.com/projectcalico/calico/v3.31.3/manifests/tigera-operator.yaml"
    plugin = "plugins/pulumi-resource-tls-v5.6.2-linux-amd64.tar.gz"
    wheel = "PyYAML-6.0.3-cp311-cp311-manylinux_2_17_x86_64.whl"
    data = {
        "images": images,
        "files": [{"source": "https://raw.githubusercontent.com/x/tigera-operator.yaml",
                   "dest": "https://files.site.example/gpucluster/x/tigera-operator.yaml",
                   "path": operator, "sha256": _write(folder / operator, b"kind: Namespace\n")}],
        "plugins": [{"name": "tls", "version": "5.6.2", "url": "https://get.pulumi.com/releases/plugins/x.tar.gz",
                     "path": plugin, "sha256": _write(folder / plugin, b"plugin archive")}],
        "built_by_you": [],
        "wheels": "wheels",
        "requirements": "requirements.lock",
        "wheel_files": {wheel: _write(folder / "wheels" / wheel, b"wheel bytes")},
        "requirements_sha256": _write(folder / "requirements.lock", (ROOT / "requirements.lock").read_bytes()),
    }  # fmt: skip
    (folder / "bundle.json").write_text(json.dumps(data, indent=2))
    return data


def test_a_complete_bundle_loads_with_digests_preserved_and_wheels_by_hash(tmp_path: Path) -> None:
    data = complete_bundle(tmp_path)
    code, out, err = _cli("bundle", "load", str(tmp_path), "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    recorded = _sha((tmp_path / "bundle.json").read_bytes())
    assert lines[0].startswith(f"bundle: bundle.json sha256 {recorded}: compare it with the one `bundle fetch` printed")
    copies = [line for line in lines if line.startswith("skopeo copy")]
    assert len(copies) == len(data["images"])
    assert all("--preserve-digests" in line.split() for line in copies)
    assert (f"pulumi plugin install resource tls 5.6.2 --file {tmp_path}/plugins/pulumi-resource-tls-v5.6.2-linux-amd64"
            ".tar.gz") in lines  # fmt: skip
    assert lines[-1].endswith(
        f"-m pip install --no-index --find-links {tmp_path}/wheels --require-hashes -r {tmp_path}/requirements.lock"
    )


ALTERED = {
    "image": ("images/pause.tar", "image upstream.example/pause:v1: images/pause.tar has SHA-256"),
    "file": ("files/raw.githubusercontent.com/projectcalico/calico/v3.31.3/manifests/tigera-operator.yaml",
             "file https://files.site.example/gpucluster/x/tigera-operator.yaml: files/raw.githubusercontent.com/"),
    "plugin": ("plugins/pulumi-resource-tls-v5.6.2-linux-amd64.tar.gz", "plugin tls 5.6.2: plugins/pulumi-resource-tls"),
    "lock": ("requirements.lock", "the lock: requirements.lock has SHA-256"),
    "wheel": ("wheels/PyYAML-6.0.3-cp311-cp311-manylinux_2_17_x86_64.whl", "wheel PyYAML-6.0.3-cp311"),
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(ALTERED))
def test_load_refuses_a_folder_where_an_artifact_differs_from_bundle_json(tmp_path: Path, kind: str) -> None:
    complete_bundle(tmp_path)
    path, named = ALTERED[kind]
    with open(tmp_path / path, "ab") as altered:
        altered.write(b"\n# one byte more\n")
    for dry_run in (["--dry-run"], []):
        code, out, err = _cli("bundle", "load", str(tmp_path), *dry_run)
        assert code == 2
        assert f"error: {named}" in err
        assert "bundle.json records" in err and "altered or damaged" in err
        assert "refused: nothing loaded" in err
        assert "skopeo" not in out and "pip" not in out


def test_load_refuses_a_lock_other_than_the_checkouts_even_when_bundle_json_matches_it(tmp_path: Path) -> None:
    """The lock's hashes are what pip trusts: one altered together with bundle.json is still refused."""
    data = complete_bundle(tmp_path)
    data["requirements_sha256"] = _write(tmp_path / "requirements.lock", b"evil==1.0 --hash=sha256:" + b"0" * 64)
    (tmp_path / "bundle.json").write_text(json.dumps(data))
    code, _, err = _cli("bundle", "load", str(tmp_path), "--dry-run")
    assert code == 2
    assert (f"error: the lock: {tmp_path}/requirements.lock is not this checkout's requirements.lock "
            f"({ROOT}/requirements.lock): run `bundle fetch` from the same commit") in err  # fmt: skip
    assert _cli("bundle", "load", str(tmp_path), "--dry-run", "--images-only")[0] == 0  # images need no lock


def test_load_refuses_an_image_whose_digest_differs(tmp_path: Path) -> None:
    """Another image in the archive's place, its file SHA-256 recorded to match: the digest
    bundle.json records still refuses it."""
    data = complete_bundle(tmp_path)
    pause = next(i for i in data["images"] if i["archive"] == "images/pause.tar")
    other = oci_archive(tmp_path / "images/pause.tar", "not the pause image\n")
    pause["sha256"] = _sha((tmp_path / "images/pause.tar").read_bytes())
    (tmp_path / "bundle.json").write_text(json.dumps(data))
    code, _, err = _cli("bundle", "load", str(tmp_path), "--dry-run")
    assert code == 2
    assert (f"error: image upstream.example/pause:v1: images/pause.tar holds digest {other}, "
            f"bundle.json records {pause['digest']}: altered or damaged") in err  # fmt: skip


def test_load_refuses_an_archive_whose_index_claims_a_digest_its_blob_lacks(tmp_path: Path) -> None:
    data = complete_bundle(tmp_path)
    archive = tmp_path / "images/pause.tar"
    with tarfile.open(archive) as tar:
        entries = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    blob = f"blobs/sha256/{data['images'][1]['digest'].removeprefix('sha256:')}"
    entries[blob] = entries[blob].replace(b'"schemaVersion": 2', b'"schemaVersion":  2')
    archive.write_bytes(_tar(entries))
    data["images"][1]["sha256"] = _sha(archive.read_bytes())
    (tmp_path / "bundle.json").write_text(json.dumps(data))
    code, _, err = _cli("bundle", "load", str(tmp_path), "--dry-run")
    assert code == 2
    assert "images/pause.tar is its manifest blob does not have the digest index.json gives it" in err


def test_load_refuses_a_missing_artifact_an_unrecorded_wheel_and_an_unhashed_bundle_all_at_once(tmp_path: Path) -> None:
    data = complete_bundle(tmp_path)
    (tmp_path / "plugins/pulumi-resource-tls-v5.6.2-linux-amd64.tar.gz").unlink()
    (tmp_path / "wheels/evil-1.0-py3-none-any.whl").write_bytes(b"runs in pulumi up")
    del data["images"][0]["sha256"]
    (tmp_path / "bundle.json").write_text(json.dumps(data))
    code, _, err = _cli("bundle", "load", str(tmp_path), "--dry-run")
    assert code == 2
    assert "error: plugin tls 5.6.2: plugins/pulumi-resource-tls-v5.6.2-linux-amd64.tar.gz is missing" in err
    assert "error: wheels/evil-1.0-py3-none-any.whl: not recorded in bundle.json: remove it" in err
    assert ("error: image upstream.example/calico_node:v1: bundle.json records no SHA-256 for images/calico_node.tar "
            "(an older `bundle fetch`): fetch again") in err  # fmt: skip


def test_load_refuses_a_path_outside_the_folder(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    data = complete_bundle(bundle)
    outside = tmp_path / "outside.tar.gz"
    data["plugins"][0]["path"] = "../outside.tar.gz"
    data["plugins"][0]["sha256"] = _write(outside, b"plugin archive")
    (bundle / "bundle.json").write_text(json.dumps(data))
    code, _, err = _cli("bundle", "load", str(bundle), "--dry-run")
    assert code == 2
    assert "error: plugin tls 5.6.2: ../outside.tar.gz is outside the bundle folder: refused" in err


def test_load_refuses_an_interrupted_fetch_naming_what_is_missing(tmp_path: Path) -> None:
    """What a fetch that stopped after one image leaves: its plan, one archive, no bundle.json."""
    data = complete_bundle(tmp_path)
    plan = {**data, "images": [{**i, "sha256": None, "digest": None} for i in data["images"]], "wheel_files": {}}
    (tmp_path / "bundle.json").unlink()
    (tmp_path / "bundle.plan.json").write_text(json.dumps(plan))
    (tmp_path / "images/pause.tar").unlink()
    (tmp_path / "plugins/pulumi-resource-tls-v5.6.2-linux-amd64.tar.gz").unlink()
    code, out, err = _cli("bundle", "load", str(tmp_path), "--dry-run")
    assert code == 2
    assert out == ""
    assert f"error: {tmp_path} is an interrupted `bundle fetch` (no bundle.json, written last); 2 missing:" in err
    assert "  image upstream.example/pause:v1 (images/pause.tar)" in err
    assert "  plugin tls 5.6.2 (plugins/pulumi-resource-tls-v5.6.2-linux-amd64.tar.gz)" in err
    assert "calico_node" not in err


def test_a_cert_dir_holding_the_ca_key_is_named_before_skopeo_runs(tmp_path: Path) -> None:
    complete_bundle(tmp_path / "bundle")
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (certs / "ca.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    code, out, err = _cli("bundle", "load", str(tmp_path / "bundle"), "--cert-dir", str(certs), "--dry-run")
    assert code == 2
    assert out == ""
    assert (f"error: --cert-dir {certs}: ca.key is a private key with no ca.cert beside it, and skopeo reads every "
            "*.key there as half of a client certificate; move it out") in err  # fmt: skip


def test_a_cert_dir_with_the_ca_as_pem_is_named_before_skopeo_runs(tmp_path: Path) -> None:
    """containers-certs.d(5): only *.crt are CAs; skopeo ignores a ca.pem and then fails on the
    registry's certificate (x509: unknown authority)."""
    complete_bundle(tmp_path / "bundle")
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    code, _, err = _cli("bundle", "load", str(tmp_path / "bundle"), "--cert-dir", str(certs), "--dry-run")
    assert code == 2
    assert f"error: --cert-dir {certs}: ca.pem is ignored: skopeo reads only *.crt as CAs; rename it ca.crt" in err
