"""The `mirror` settings: one place that moves every image and fetched file to a site's own mirror."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

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
