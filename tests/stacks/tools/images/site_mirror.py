"""An air-gapped site in a network namespace of the test's own: a real registry (Debian's
docker-registry, distribution 2.8) and a file server over TLS with certificates from a test CA, and
a private instance of the real containerd (its own root, state and socket) configured as a node's
first boot left it. The namespace has only loopback, so a pull or download aimed anywhere but the
mirror fails at once instead of leaving the machine.

containerd's CRI is spoken over its socket with gRPC (runtime.v1 ImageService/PullImage and
RuntimeService/Status, the calls the kubelet makes), the few protobuf fields encoded by hand.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from tests.real_parts import require_program

REGISTRY_PORT = 5000
PLAIN_REGISTRY_PORT = 5001
"""A second registry without TLS, for `mirror.plainHttp`."""
FILES_PORT = 8443
HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[4]
IP = shutil.which("ip") or "/usr/sbin/ip"

_FILE_SERVER = """
import functools, http.server, ssl, sys
root, cert, key, port = sys.argv[1:5]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""


def _run(*command: str, stdin: str | None = None) -> str:
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{' '.join(command)}: {result.stderr}"
    return result.stdout


def make_ca(folder: Path) -> tuple[Path, Path, Path]:
    """A test CA and a server certificate for 127.0.0.1 signed by it: (ca.crt, server.crt, server.key)."""
    openssl = require_program("openssl", "/usr/bin/openssl", "openssl")
    ca_key, ca_crt = folder / "ca.key", folder / "ca.crt"
    key, csr, crt, ext = folder / "server.key", folder / "server.csr", folder / "server.crt", folder / "ext.cnf"
    curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _run(openssl, "req", "-x509", *curve, "-keyout", str(ca_key), "-out", str(ca_crt), "-days", "2",
         "-subj", "/CN=gpucluster air-gapped test CA")  # fmt: skip
    _run(openssl, "req", *curve, "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={HOST}")
    ext.write_text(f"subjectAltName=IP:{HOST}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    _run(openssl, "x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
         "-out", str(crt), "-days", "2", "-extfile", str(ext))  # fmt: skip
    return ca_crt, crt, key


@dataclass
class Site:
    """The namespace and what runs in it."""

    folder: Path
    netns: str
    ca: Path
    processes: list[subprocess.Popen[bytes]]

    @property
    def registry(self) -> str:
        return f"{HOST}:{REGISTRY_PORT}"

    @property
    def plain_registry(self) -> str:
        return f"{HOST}:{PLAIN_REGISTRY_PORT}"

    @property
    def files_url(self) -> str:
        return f"https://{HOST}:{FILES_PORT}"

    @property
    def files_root(self) -> Path:
        return self.folder / "files"

    def inside(self, *command: str) -> list[str]:
        return [IP, "netns", "exec", self.netns, *command]

    def push(self, references: list[str], *, plain_http: bool = False) -> None:
        """One tiny image under each reference (oci_push.py, in the namespace)."""
        if references:
            plain = ["--plain-http"] if plain_http else []
            command = self.inside(sys.executable, "-m", "tests.stacks.tools.images.oci_push", str(self.ca), *plain)
            result = subprocess.run(
                command, input="\n".join(references), capture_output=True, text=True, timeout=120, cwd=ROOT
            )
            assert result.returncode == 0, result.stderr

    def start(self, *command: str, log: str) -> subprocess.Popen[bytes]:
        with open(self.folder / log, "wb") as out:
            process = subprocess.Popen(self.inside(*command), stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        self.processes.append(process)
        return process

    def wait_for(self, url: str, what: str) -> None:
        for _ in range(100):
            trust = ["--cacert", str(self.ca)] if url.startswith("https:") else []
            probe = subprocess.run(self.inside("curl", "-fsS", "-o", "/dev/null", *trust, url), capture_output=True)
            if probe.returncode == 0:
                return
            time.sleep(0.1)
        raise AssertionError(f"{what} did not answer at {url}")


def open_site(folder: Path) -> Iterator[Site]:
    """The namespace with the registry and the file server running; everything removed after."""
    registry = require_program("docker-registry", "/usr/bin/docker-registry", "docker-registry")
    require_program("ip", "/usr/sbin/ip", "iproute2")
    require_program("curl", "/usr/bin/curl", "curl")
    ca, cert, key = make_ca(folder)
    # Unique per site: two test modules' sites may be open at once (random order across modules).
    netns = f"gpuc-airgap-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    _run("ip", "netns", "add", netns)
    site = Site(folder=folder, netns=netns, ca=ca, processes=[])
    try:
        _run(*site.inside("ip", "link", "set", "lo", "up"))
        config = folder / "registry.yml"
        config.write_text(
            json.dumps(  # YAML is a superset of JSON
                {
                    "version": 0.1,
                    "log": {"level": "error"},
                    "storage": {"filesystem": {"rootdirectory": str(folder / "registry")}},
                    "http": {"addr": f"{HOST}:{REGISTRY_PORT}", "tls": {"certificate": str(cert), "key": str(key)}},
                }
            )
        )
        site.start(registry, "serve", str(config), log="registry.log")
        plain = folder / "registry-plain.yml"
        plain.write_text(
            json.dumps(
                {
                    "version": 0.1,
                    "log": {"level": "error"},
                    "storage": {"filesystem": {"rootdirectory": str(folder / "registry-plain")}},
                    "http": {"addr": f"{HOST}:{PLAIN_REGISTRY_PORT}"},
                }
            )
        )
        site.start(registry, "serve", str(plain), log="registry-plain.log")
        site.files_root.mkdir()
        site.start(sys.executable, "-c", _FILE_SERVER, str(site.files_root), str(cert), str(key), str(FILES_PORT),
                   log="files.log")  # fmt: skip
        site.wait_for(f"https://{site.registry}/v2/", "the registry")
        site.wait_for(f"http://{site.plain_registry}/v2/", "the plain-HTTP registry")
        site.wait_for(f"{site.files_url}/", "the file server")
        yield site
    finally:
        for process in site.processes:
            process.terminate()
            process.wait(timeout=20)
        subprocess.run(["ip", "netns", "del", netns], check=False)


# --- containerd ---------------------------------------------------------------------------------
def private_config(node_config: str, node_root: Path, instance: Path) -> str:
    """The node's config.toml for a private instance: its own root, state and sockets, and
    config_path read under the node's root; every other line as the first boot left it."""
    text = node_config
    replacements = {
        r'(?m)^root = ".*"$': f'root = "{instance / "root"}"',
        r'(?m)^state = ".*"$': f'state = "{instance / "state"}"',
        r'(?m)^(\s*)address = "/run/containerd/containerd.sock"$': rf'\1address = "{instance / "containerd.sock"}"',
        r'(?m)^(\s*config_path = )"/etc/containerd/certs.d"$': rf'\1"{node_root / "etc/containerd/certs.d"}"',
    }
    for pattern, value in replacements.items():
        text, count = re.subn(pattern, value, text)
        assert count >= 1, f"{pattern} not in the node's containerd config"
    return text


class Cri:
    """The kubelet's calls to containerd's CRI, over its socket."""

    def __init__(self, socket: Path) -> None:
        self.channel = grpc.insecure_channel(f"unix://{socket}")

    @staticmethod
    def _field(number: int, payload: bytes) -> bytes:
        return _varint(number << 3 | 2) + _varint(len(payload)) + payload

    def pull(self, image: str) -> str | None:
        """None when pulled, else containerd's error."""
        request = self._field(1, self._field(1, image.encode()))  # PullImageRequest.image.image
        call = self.channel.unary_unary("/runtime.v1.ImageService/PullImage")
        try:
            call(request, timeout=60)
        except grpc.RpcError as error:
            return str(error.details())  # type: ignore[attr-defined]
        return None

    def config(self) -> dict[str, object]:
        """The CRI plugin's configuration as it runs (Status verbose: info["config"])."""
        call = self.channel.unary_unary("/runtime.v1.RuntimeService/Status")
        reply = call(b"\x08\x01", timeout=30)  # StatusRequest{verbose: true}
        info = dict(_map_entries(reply, 2))
        loaded: dict[str, object] = json.loads(info["config"])
        return loaded

    def wait(self) -> None:
        for _ in range(150):
            try:
                self.config()
                return
            except grpc.RpcError:
                time.sleep(0.1)
        raise AssertionError("containerd's CRI did not answer")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(number, payload) of the length-delimited fields of a message (others skipped)."""
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        kind = key & 7
        if kind == 2:
            size, at = _read_varint(data, at)
            yield key >> 3, data[at : at + size]
            at += size
        elif kind == 0:
            _, at = _read_varint(data, at)
        else:
            raise AssertionError(f"unexpected protobuf wire type {kind}")


def _map_entries(data: bytes, number: int) -> Iterator[tuple[str, str]]:
    for field, entry in _fields(data):
        if field == number:
            parts = dict(_fields(entry))
            yield parts.get(1, b"").decode(), parts.get(2, b"").decode()
