"""What makes a carried folder trustworthy (issue 53): the SHA-256 of every file `bundle load`
reads, and each image's digest, recorded in `bundle.json` when the fetch has them, checked before
anything is loaded; and `bundle.json`'s own SHA-256, printed on both sides to compare out of band
(whoever can alter the folder can alter `bundle.json` too, but not what the operator wrote down).

An image's digest is read from its OCI archive the way an OCI layout defines it (image-spec
`image-layout.md`: `index.json` names the manifest, or the index of a multi-platform image, by
descriptor; the blob lives at `blobs/<alg>/<encoded>`), and the blob's bytes are hashed, so an
archive whose `index.json` claims a digest its blob does not have is refused too.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import replace
from pathlib import Path

from stacks.tools.bundle.contents import BundleContents

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as data:
        while chunk := data.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def archive_digest(path: Path) -> str:
    """The digest (`sha256:...`) of the one manifest or index an OCI archive holds, checked
    against its blob's bytes; ValueError saying what is wrong otherwise."""
    try:
        with tarfile.open(path) as tar:
            index = json.loads(_member(tar, "index.json"))
            manifests = index.get("manifests", [])
            if len(manifests) != 1:
                raise ValueError(f"its index.json names {len(manifests)} manifests, not one")
            digest = str(manifests[0]["digest"])
            algorithm, _, encoded = digest.partition(":")
            if algorithm != "sha256":
                raise ValueError(f"its manifest digest {digest} is not sha256")
            blob = _member(tar, f"blobs/sha256/{encoded}")
    except (tarfile.TarError, OSError, KeyError, json.JSONDecodeError) as error:
        raise ValueError(f"not an OCI archive ({error})") from error
    if hashlib.sha256(blob).hexdigest() != encoded:
        raise ValueError(f"its manifest blob does not have the digest index.json gives it ({digest})")
    return digest


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    for candidate in (name, f"./{name}"):
        try:
            member = tar.extractfile(candidate)
        except KeyError:
            continue
        if member is not None:
            return member.read()
    raise KeyError(f"no {name}")


def _inside(bundle: Path, path: str) -> bool:
    return (bundle / path).resolve().is_relative_to(bundle.resolve())


def problems(contents: BundleContents, bundle: Path) -> list[str]:
    """Every way the folder differs from what `bundle.json` records, all at once; empty when none."""
    found = []
    for what, path, recorded in contents.artifacts():
        if not _inside(bundle, path):
            found.append(f"{what}: {path} is outside the bundle folder: refused")
        elif recorded is None:
            found.append(f"{what}: bundle.json records no SHA-256 for {path} (an older `bundle fetch`): fetch again")
        elif not (bundle / path).is_file():
            found.append(f"{what}: {path} is missing")
        elif (actual := sha256_file(bundle / path)) != recorded:
            found.append(f"{what}: {path} has SHA-256 {actual}, bundle.json records {recorded}: altered or damaged")
    for image in contents.images:
        archive = bundle / image.archive
        if image.digest is None:
            found.append(f"image {image.source}: bundle.json records no digest (an older `bundle fetch`): fetch again")
        elif _inside(bundle, image.archive) and archive.is_file():
            try:
                digest = archive_digest(archive)
            except ValueError as error:
                found.append(f"image {image.source}: {image.archive} is {error}")
                continue
            if digest != image.digest:
                found.append(
                    f"image {image.source}: {image.archive} holds digest {digest}, "
                    f"bundle.json records {image.digest}: altered or damaged"
                )
    wheels = bundle / contents.wheels
    if wheels.is_dir():
        found += [
            f"{contents.wheels}/{extra.name}: not recorded in bundle.json: remove it"
            for extra in sorted(wheels.iterdir())
            if extra.name not in contents.wheel_files
        ]
    return found


def record(contents: BundleContents, out: Path) -> BundleContents:
    """`contents` with the SHA-256 of each file the fetch wrote and each image's digest."""
    wheels = out / contents.wheels
    return replace(
        contents,
        images=[
            replace(i, sha256=sha256_file(out / i.archive), digest=archive_digest(out / i.archive))
            for i in contents.images
        ],
        files=[replace(f, sha256=sha256_file(out / f.path)) for f in contents.files],
        plugins=[replace(p, sha256=sha256_file(out / p.path)) for p in contents.plugins],
        wheel_files={w.name: sha256_file(w) for w in sorted(wheels.iterdir())} if wheels.is_dir() else {},
        requirements_sha256=sha256_file(out / contents.requirements),
    )


def cert_dir_problems(cert_dir: Path) -> list[str]:
    """What skopeo would refuse in `--dest-cert-dir`, said before it runs. containers/image reads
    the folder as containers-certs.d(5) says (pkg/tlsclientconfig/tlsclientconfig.go,
    SetupCertificates): `*.crt` are CAs, `*.cert` a client certificate that needs its `*.key`, and
    a `*.key` needs its `*.cert` (else "missing client certificate X.cert for key X.key")."""
    if not cert_dir.is_dir():
        return [f"--cert-dir {cert_dir}: not a folder; give the folder holding the site CA as *.crt"]
    names = {entry.name for entry in cert_dir.iterdir()}
    found = [
        f"--cert-dir {cert_dir}: {name} is a private key with no {name[:-4]}.cert beside it, and skopeo reads "
        f"every *.key there as half of a client certificate; move it out (the CA's key does not belong on "
        f"this machine) and leave the CA as *.crt"
        for name in sorted(names)
        if name.endswith(".key") and f"{name[:-4]}.cert" not in names
    ]
    found += [
        f"--cert-dir {cert_dir}: {name} is a client certificate with no {name[:-5]}.key; a CA must be named *.crt"
        for name in sorted(names)
        if name.endswith(".cert") and f"{name[:-5]}.key" not in names
    ]
    if not any(name.endswith(".crt") for name in names):  # skopeo ignores the rest: "x509: unknown authority"
        found += [
            f"--cert-dir {cert_dir}: {name} is ignored: skopeo reads only *.crt as CAs; rename it {name[:-4]}.crt"
            for name in sorted(names)
            if name.endswith(".pem")
        ]
    return found
