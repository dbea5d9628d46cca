"""Push one tiny OCI image under each reference read from stdin, through the registry's HTTP API
(distribution's "Pushing An Image": blob upload by POST then PUT `?digest=`, then the manifest).

Run inside the test's network namespace (`ip netns exec NS python -m ...`), where the registry
listens: `python -m tests.stacks.tools.images.oci_push CA_FILE [--plain-http] < refs`. Every image is the same
few hundred bytes: one layer holding one file, its config and an OCI manifest.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import io
import json
import ssl
import sys
import tarfile


def _layer() -> bytes:
    data = b"gpucluster air-gapped test image\n"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("hello")
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def image() -> tuple[bytes, bytes, bytes]:
    """(layer, config, manifest)."""
    layer = _layer()
    diff_id = "sha256:" + hashlib.sha256(gzip.decompress(layer)).hexdigest()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Cmd": ["/hello"]},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _digest(config),
                "size": len(config),
            },
            "layers": [
                {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": _digest(layer), "size": len(layer)}
            ],
        }
    ).encode()
    return layer, config, manifest


def _request(conn: http.client.HTTPConnection, method: str, url: str, body: bytes = b"", **headers: str) -> str:
    conn.request(method, url, body=body, headers={"Content-Length": str(len(body)), **headers})
    response = conn.getresponse()
    response.read()
    if response.status >= 300:
        raise SystemExit(f"{method} {url}: HTTP {response.status}")
    return response.getheader("Location") or ""


def push(conn: http.client.HTTPConnection, reference: str) -> None:
    host, _, rest = reference.partition("/")
    name, _, tag = rest.rpartition(":")
    layer, config, manifest = image()
    for blob in (layer, config):
        location = _request(conn, "POST", f"/v2/{name}/blobs/uploads/")
        path = location.split(host, 1)[-1] if "://" in location else location
        joiner = "&" if "?" in path else "?"
        _request(conn, "PUT", f"{path}{joiner}digest={_digest(blob)}", blob, **{"Content-Type": "application/octet-stream"})
    _request(
        conn,
        "PUT",
        f"/v2/{name}/manifests/{tag}",
        manifest,
        **{"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
    )


def main() -> None:
    ca_file = sys.argv[1]
    plain_http = "--plain-http" in sys.argv[2:]
    references = [line.strip() for line in sys.stdin if line.strip()]
    connections: dict[str, http.client.HTTPConnection] = {}
    context = ssl.create_default_context(cafile=ca_file)
    for reference in references:
        host = reference.split("/", 1)[0]
        if host not in connections:
            connections[host] = (
                http.client.HTTPConnection(host, timeout=30)
                if plain_http
                else http.client.HTTPSConnection(host, context=context, timeout=30)
            )
        push(connections[host], reference)
    print(f"pushed {len(references)}")


if __name__ == "__main__":
    main()
