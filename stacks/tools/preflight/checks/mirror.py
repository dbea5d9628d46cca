"""The site's mirror as the nodes will meet it (issue 55): the registry and the file server, each
asked over TLS with exactly the trust the nodes get (the system CAs plus `mirror.caBundle`, which
the first boot adds with `update-ca-trust` and containerd's `hosts.toml`), for one thing the stack
lists: the registry for the pod sandbox image (`pause` at kubeadm's pin, the first image every
node pulls; else the first image `stacks images` lists beyond the plan), through the registry API's
manifest endpoint (distribution's spec, "Pulling an image manifest": `GET /v2/<name>/manifests/
<reference>`), and the file server for the first file the stack fetches from it.

A certificate those CAs do not verify is a BLOCKER: every node fails its first boot on it. A host
that does not answer from here is a warning, as for the license service: the nodes may reach what
this machine cannot. A registry that asks for credentials is a warning too: preflight holds none.
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from components.k8s.mirror import mirrored_image, parse_image
from stacks.environment.model import Environment
from stacks.tools.preflight.checks.report import Report

TIMEOUT_S = 10.0
MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)


@dataclass(frozen=True)
class Answer:
    status: int | None = None
    """The HTTP status; None when there was no answer."""
    untrusted: str | None = None
    """Why the certificate was not verified (the TLS handshake failed on it)."""
    unreachable: str | None = None


Fetch = Callable[[str, str, str, str | None], Answer]
"""(scheme, host[:port], path, CA bundle) -> what the server said."""


def trust(ca_bundle: str | None) -> ssl.SSLContext:
    """The nodes' trust: the system CAs, plus the site CA when the stack gives one."""
    context = ssl.create_default_context()
    if ca_bundle:
        context.load_verify_locations(cadata=ca_bundle)
    return context


def http_fetch(scheme: str, netloc: str, path: str, ca_bundle: str | None) -> Answer:
    connection: http.client.HTTPConnection
    if scheme == "https":
        connection = http.client.HTTPSConnection(netloc, timeout=TIMEOUT_S, context=trust(ca_bundle))
    else:
        connection = http.client.HTTPConnection(netloc, timeout=TIMEOUT_S)
    try:
        connection.request("GET", path, headers={"Accept": MANIFEST_TYPES})
        return Answer(status=connection.getresponse().status)
    except ssl.SSLCertVerificationError as error:
        return Answer(untrusted=error.verify_message or str(error))
    except (OSError, http.client.HTTPException) as error:
        return Answer(unreachable=str(error) or type(error).__name__)
    finally:
        connection.close()


def sandbox_image(env: Environment) -> str | None:
    """The listed image preflight asks the registry for, as the nodes pull it."""
    from stacks.tools.images.inventory import outside_plan_images  # the add-ons' image lists: only here

    listed = [image for image, _ in outside_plan_images(env)]
    if not listed:
        return None
    chosen = next((image for image in listed if parse_image(image).path.split("/")[-1] == "pause"), listed[0])
    return mirrored_image(chosen, env.mirror.registry)


def first_file(env: Environment) -> str | None:
    from stacks.tools.images.inventory import needed_files

    return next((f.dest for f in needed_files(env)), None)


def _trust_words(env: Environment) -> str:
    return "the system CAs and mirror.caBundle" if env.mirror.ca_bundle else "the system CAs (no mirror.caBundle)"


def _untrusted(env: Environment, report: Report, key: str, what: str, why: str) -> None:
    report.blocker(
        ("mirror", key),
        f"{what} presents a certificate {_trust_words(env)} do not verify ({why}): every node's first boot fails "
        f"on it; set mirror.caBundle to the PEM of the CA that signed {what}'s certificate",
    )


def check_registry(env: Environment, report: Report, fetch: Fetch = http_fetch) -> None:
    registry = env.mirror.registry
    if registry is None:
        return
    netloc = registry.split("/")[0]
    scheme = "http" if env.mirror.plain_http else "https"
    what = f"the registry {netloc}"
    image = sandbox_image(env)
    if image is None:
        path, listed = "/v2/", None
    else:
        parsed = parse_image(image)
        path, listed = f"/v2/{parsed.path}/manifests/{parsed.digest or parsed.tag or 'latest'}", image
    answer = fetch(scheme, netloc, path, env.mirror.ca_bundle)
    if answer.untrusted is not None:
        _untrusted(env, report, "caBundle", what, answer.untrusted)
    elif answer.unreachable is not None:
        report.warn(("mirror", "registry"), f"{what} does not answer from here ({answer.unreachable}); the nodes "
                    "must reach it over " + scheme.upper())  # fmt: skip
    elif answer.status == 200:
        verified = f"over TLS verified by {_trust_words(env)}" if scheme == "https" else "over plain HTTP"
        report.ok(("mirror", "registry"), f"{what} answers {verified}" + (f" and has {listed}" if listed else ""))
    elif answer.status == 401:
        report.warn(("mirror", "registry"), f"{what} answers but asks for credentials (HTTP 401); preflight holds "
                    f"none, so {listed or 'no image'} was not looked for")  # fmt: skip
    elif answer.status == 404 and listed:
        report.blocker(("mirror", "registry"), f"{what} has no {listed} (the first image every node pulls): load "
                       "the bundle into it (`python -m stacks bundle load`, docs/air-gapped.md)")  # fmt: skip
    else:
        report.warn(("mirror", "registry"), f"{what} answered HTTP {answer.status} for {path}")


def check_files(env: Environment, report: Report, fetch: Fetch = http_fetch) -> None:
    url = first_file(env) if env.mirror.files else None
    if url is None:
        return
    parts = urlsplit(url)
    what = f"the file server {parts.netloc}"
    answer = fetch(parts.scheme, parts.netloc, parts.path, env.mirror.ca_bundle)
    if answer.untrusted is not None:
        _untrusted(env, report, "caBundle", what, answer.untrusted)
    elif answer.unreachable is not None:
        report.warn(("mirror", "files"), f"{what} does not answer from here ({answer.unreachable}); the nodes "
                    "must reach it")  # fmt: skip
    elif answer.status == 200:
        report.ok(("mirror", "files"), f"{what} answers over TLS verified by {_trust_words(env)} and serves {url}")
    elif answer.status == 404:
        report.blocker(("mirror", "files"), f"{what} does not serve {url}: serve the bundle's files/ folder at "
                       "mirror.files (docs/air-gapped.md)")  # fmt: skip
    else:
        report.warn(("mirror", "files"), f"{what} answered HTTP {answer.status} for {url}")


def check_mirror(env: Environment, report: Report, fetch: Fetch = http_fetch) -> None:
    check_registry(env, report, fetch)
    check_files(env, report, fetch)
