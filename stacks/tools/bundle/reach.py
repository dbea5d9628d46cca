"""Before `bundle fetch` writes anything: can this machine reach what it fetches from? A TCP
connection to each source host (or to the proxy that would carry it), all at once, so a machine
inside the site says at once where to run the fetch instead of failing on the first image.

Image hosts as containers/image resolves them: a reference whose first path component has no `.`
or `:` and is not `localhost` is Docker Hub's (docker/reference `splitDockerDomain`), whose
registry API answers at `registry-1.docker.io` (containers/image docker/docker_client.go,
`dockerV1Hostname`/`dockerRegistry`)."""

from __future__ import annotations

import socket
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from stacks.tools.bundle.contents import BundleContents

TIMEOUT_S = 10.0
DOCKER_HUB = "registry-1.docker.io"


def image_host(reference: str) -> str:
    first, slash, _ = reference.partition("/")
    if not slash or ("." not in first and ":" not in first and first != "localhost"):
        return DOCKER_HUB
    return DOCKER_HUB if first in ("docker.io", "index.docker.io") else first


def _address(host_port: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(f"//{host_port}")
    return parts.hostname or host_port, parts.port or default_port


def sources(contents: BundleContents) -> list[tuple[str, int]]:
    """Each (host, port) the fetch connects to, once, in a stable order."""
    found = [_address(image_host(i.source), 443) for i in contents.images]
    for url in [f.source for f in contents.files] + [p.url for p in contents.plugins]:
        parts = urlsplit(url)
        found.append((parts.hostname or "", parts.port or (80 if parts.scheme == "http" else 443)))
    return list(dict.fromkeys(found))


def _through(host: str, port: int) -> tuple[str, int]:
    """The proxy a connection to `host` goes through (HTTPS_PROXY and NO_PROXY), else the host."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get("https" if port != 80 else "http")
    if proxy and not urllib.request.proxy_bypass(host):
        parts = urlsplit(proxy if "//" in proxy else f"//{proxy}")
        return parts.hostname or proxy, parts.port or 80
    return host, port


def unreachable(endpoints: list[tuple[str, int]], *, timeout: float = TIMEOUT_S) -> list[str]:
    """`host:port (why)` of each endpoint this machine cannot open a connection to."""

    def probe(endpoint: tuple[str, int]) -> str | None:
        host, port = endpoint
        target = _through(host, port)
        try:
            socket.create_connection(target, timeout=timeout).close()
        except OSError as error:
            via = f" through the proxy {target[0]}:{target[1]}" if target != endpoint else ""
            return f"{host}:{port}{via} ({error.strerror or error})"
        return None

    with ThreadPoolExecutor(16) as pool:
        return [found for found in pool.map(probe, endpoints) if found]
