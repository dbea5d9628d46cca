"""The `mirror` settings: one place that moves every image and fetched file to a site's own mirror."""

from __future__ import annotations

import re
import ssl
from typing import Annotated

from pydantic import AfterValidator, model_validator

from stacks.environment.base import Model
from stacks.environment.fields import ManifestUrl

_REGISTRY = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:\d{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")


def _registry(value: str) -> str:
    if (
        "://" in value
        or not _REGISTRY.match(value)
        or ("." not in value.split("/")[0] and ":" not in value.split("/")[0])
    ):
        raise ValueError(
            f"{value!r} is not a registry prefix: give a host with a dot or a port and an optional lowercase "
            "path, no scheme and no trailing '/', e.g. registry.site.example:5000/gpucluster"
        )
    return value


RegistryPrefix = Annotated[str, AfterValidator(_registry)]


def _ca_bundle(value: str) -> str:
    """One or more PEM certificates, as OpenSSL reads them (the same parser curl and the nodes'
    trust store use; `ssl` loads each certificate and refuses a broken one)."""
    if "-----BEGIN CERTIFICATE-----" not in value:
        raise ValueError(
            "is not a PEM certificate bundle: paste the site CA's certificate(s), each from "
            "-----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----"
        )
    try:
        ssl.create_default_context().load_verify_locations(cadata=value)
    except ssl.SSLError as error:
        raise ValueError(f"is not a readable PEM certificate bundle ({error.reason or error})") from None
    return value if value.endswith("\n") else value + "\n"


CaBundle = Annotated[str, AfterValidator(_ca_bundle)]

_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)(:\d{1,5})?$")


def _host_port(value: str) -> str:
    if not _HOST_PORT.match(value):
        raise ValueError(f"{value!r} is not host[:port]: give the DLS instance's name or address, e.g. dls.site.example")
    return value


HostPort = Annotated[str, AfterValidator(_host_port)]


class Mirror(Model):
    registry: RegistryPrefix | None = None
    """Image registry prefix every image the stack runs is pulled from instead of its public
    registry (add-ons, the GPU Operator's and Calico's images, kubeadm's, the jobs, the probe):
    `nvcr.io/nvidia/x:1` becomes `<registry>/nvidia/x:1`. `python -m stacks images STACK` lists
    what to copy there. Default none: public registries."""
    files: ManifestUrl | None = None
    """https base of the files the cluster itself fetches (Calico's `tigera-operator.yaml` at the
    first boot, the GPU Operator's chart at deploy): `https://host/path` is read from
    `<files>/host/path`. Default none: upstream's URLs. Manifests preview and deploy apply
    are vendored in the repository and fetched from nowhere."""
    ca_bundle: CaBundle | None = None
    """PEM certificate(s) of the CA that signed the mirror's servers (`registry` and `files`), when
    it is not a public one. Every node gets it in its trust store (/etc/pki/ca-trust/source/anchors,
    `update-ca-trust`), containerd gets it for the registry (`certs.d/<host>/hosts.toml`), and the
    first boot's downloads from `files` trust it. Default none: the nodes' system CAs only."""
    license_server: HostPort | None = None
    """The NVIDIA License System instance inside the site the vGPU guests license from, as
    host[:port] (port 443 when left out): a DLS (Delegated License Service) virtual appliance,
    downloaded from the NVIDIA Licensing Portal and run on-premises, since the guests cannot reach
    NVIDIA's cloud service. The client configuration token it issues is the secret
    `vsphere-gpu-cluster:nvidiaLicenseToken`. Used by `preflight`, which checks it answers.
    Default none: not checked."""
    plain_http: bool = False
    """Pull from `registry` over plain HTTP (containerd `hosts.toml` `server = "http://..."`): only
    for a registry on a network you trust, as nothing authenticates it. Default false: HTTPS."""

    @model_validator(mode="after")
    def _keys_that_need_a_mirror(self) -> Mirror:
        if self.plain_http and self.registry is None:
            raise ValueError("plainHttp is set but there is no registry to pull over plain HTTP; set registry")
        if self.ca_bundle is not None and self.registry is None and self.files is None:
            raise ValueError("caBundle is set but neither registry nor files is; set them, or remove caBundle")
        return self
