"""`python -m stacks preflight` against the vCenter simulator with a site mirror (issue 55 item 2): a
real registry (Debian's docker-registry) and a file server over TLS with a test CA, asked with the
trust the nodes get. The stack's CA verifies them: OK; no CA, or another one: a BLOCKER naming the
registry (and the file server) under `mirror.caBundle`; the listed image or file absent: a BLOCKER.

Both servers listen on free loopback ports of this namespace, where the simulator answers too."""

from __future__ import annotations

import copy
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components.k8s.mirror import mirrored_image, mirrored_url
from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, load_environment
from stacks.tools.images.inventory import needed_files, outside_plan_images
from tests.real_parts import require_program
from tests.stacks.tools.images.site_mirror import _FILE_SERVER, ROOT, make_ca

from .test_preflight_vcsim import BASE

pytestmark = pytest.mark.vcsim

KEY = f"{ENVIRONMENT_KEY}.mirror"


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as server:
        return int(server.getsockname()[1])


@dataclass(frozen=True)
class Mirror:
    registry: str
    files: str
    files_root: Path
    ca_file: Path
    ca: str
    other_ca: str


def _wait(url: str, ca: Path) -> None:
    for _ in range(100):
        if (
            subprocess.run(
                ["curl", "-fsS", "-o", "/dev/null", "--cacert", str(ca), url], capture_output=True
            ).returncode
            == 0
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirror]:
    registry_program = require_program("docker-registry", "/usr/bin/docker-registry", "docker-registry")
    require_program("curl", "/usr/bin/curl", "curl")
    folder = tmp_path_factory.mktemp("mirror")
    ca, cert, key = make_ca(folder)
    other = folder / "other"
    other.mkdir()
    other_ca, _, _ = make_ca(other)
    registry, files = f"127.0.0.1:{_free_port()}", _free_port()
    config = folder / "registry.yml"
    config.write_text(json.dumps({
        "version": 0.1, "log": {"level": "error"},
        "storage": {"filesystem": {"rootdirectory": str(folder / "registry")}},
        "http": {"addr": registry, "tls": {"certificate": str(cert), "key": str(key)}},
    }))  # fmt: skip
    root = folder / "files"
    root.mkdir()
    with open(folder / "servers.log", "wb") as log:
        processes = [
            subprocess.Popen([registry_program, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT),
            subprocess.Popen([sys.executable, "-c", _FILE_SERVER, str(root), str(cert), str(key), str(files)],
                             stdout=log, stderr=subprocess.STDOUT),
        ]  # fmt: skip
    try:
        _wait(f"https://{registry}/v2/", ca)
        _wait(f"https://127.0.0.1:{files}/", ca)
        yield Mirror(registry=f"{registry}/gpucluster", files=f"https://127.0.0.1:{files}/gpucluster",
                     files_root=root, ca_file=ca, ca=ca.read_text(), other_ca=other_ca.read_text())  # fmt: skip
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=20)


def _env(mirror: Mirror, **keys: Any) -> dict[str, Any]:
    env = copy.deepcopy(BASE)
    env["mirror"] = {"registry": mirror.registry, "files": mirror.files, **keys}
    return env


def _listed(env: dict[str, Any]) -> tuple[str, str]:
    """The pause image `stacks images` lists, in the mirror, and the first file it lists, as served."""
    loaded = load_environment(ConfigView(values={ENVIRONMENT_KEY: env}, secret_keys=frozenset()))
    pause = next(image for image, _ in outside_plan_images(loaded) if "/pause:" in image)
    return mirrored_image(pause, loaded.mirror.registry), mirrored_url(
        needed_files(loaded)[0].source, loaded.mirror.files
    )


@pytest.fixture(scope="module")
def loaded(mirror: Mirror) -> tuple[str, str]:
    """The mirror holding the listed image and serving the listed file."""
    image, url = _listed(_env(mirror))
    push = subprocess.run([sys.executable, "-m", "tests.stacks.tools.images.oci_push", str(mirror.ca_file)], input=image,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert push.returncode == 0, push.stderr
    served = mirror.files_root / url.removeprefix(mirror.files.removesuffix("/gpucluster") + "/")
    served.parent.mkdir(parents=True, exist_ok=True)
    served.write_text("kind: Namespace\n")
    return image, url


def _mirror_lines(lines: list[str]) -> list[str]:
    """The findings of this check (not the license service's, under mirror.licenseServer)."""
    return [line for line in lines if any(f" {KEY}.{key}:" in line for key in ("registry", "files", "caBundle"))]


def test_the_stacks_ca_verifies_the_registry_and_the_file_server(
    preflight: Callable[..., tuple[int, list[str]]], mirror: Mirror, loaded: tuple[str, str]
) -> None:
    image, url = loaded
    _, lines = preflight(_env(mirror, caBundle=mirror.ca))
    host = mirror.registry.split("/")[0]
    assert _mirror_lines(lines) == [
        f"OK      {KEY}.registry: the registry {host} answers over TLS verified by the system CAs and "
        f"mirror.caBundle and has {image}",
        f"OK      {KEY}.files: the file server {url.split('/')[2]} answers over TLS verified by the system CAs and "
        f"mirror.caBundle and serves {url}",
    ]


@pytest.mark.parametrize("ca", ["none", "another"])
def test_a_missing_or_wrong_ca_is_a_blocker_naming_the_registry(
    preflight: Callable[..., tuple[int, list[str]]], mirror: Mirror, loaded: tuple[str, str], ca: str
) -> None:
    keys = {"caBundle": mirror.other_ca} if ca == "another" else {}
    code, lines = preflight(_env(mirror, **keys))
    assert code == 1
    host = mirror.registry.split("/")[0]
    trusted = "the system CAs and mirror.caBundle" if keys else "the system CAs (no mirror.caBundle)"
    found = _mirror_lines(lines)
    assert len(found) == 2, found
    assert found[0].startswith(f"BLOCKER {KEY}.caBundle: the registry {host} presents a certificate {trusted} "
                               "do not verify (")  # fmt: skip
    assert found[0].endswith(f"): every node's first boot fails on it; set mirror.caBundle to the PEM of the CA "
                             f"that signed the registry {host}'s certificate")  # fmt: skip
    assert found[1].startswith(f"BLOCKER {KEY}.caBundle: the file server {loaded[1].split('/')[2]} presents")


def test_a_mirror_without_the_listed_image_or_file_is_a_blocker(
    preflight: Callable[..., tuple[int, list[str]]], mirror: Mirror, loaded: tuple[str, str]
) -> None:
    env = _env(mirror, caBundle=mirror.ca)
    env["mirror"]["registry"] += "-empty"
    env["mirror"]["files"] += "-empty"
    image, url = _listed(env)
    code, lines = preflight(env)
    assert code == 1
    assert _mirror_lines(lines) == [
        f"BLOCKER {KEY}.registry: the registry {mirror.registry.split('/')[0]} has no {image} (the first image every "
        "node pulls): load the bundle into it (`python -m stacks bundle load`, docs/air-gapped.md)",
        f"BLOCKER {KEY}.files: the file server {url.split('/')[2]} does not serve {url}: serve the bundle's files/ "
        "folder at mirror.files (docs/air-gapped.md)",
    ]
