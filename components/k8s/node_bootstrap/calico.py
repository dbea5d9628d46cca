"""Calico's `Installation` for the tigera-operator: the pod network of the cluster."""

from __future__ import annotations

from typing import Any

from components.k8s.node_bootstrap.spec import ClusterSpec


def calico_installation_documents(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The tigera-operator `Installation` for this cluster's pod network.

    With a mirror, `registry` moves every image the operator deploys there: the operator builds
    `<registry><imagePath>/<imagePrefix><imageName>:<tag>` and keeps each image's default path
    (`calico/node`) when `imagePath` is unset (Installation API `registry`/`imagePath`;
    tigera/operator pkg/components/references.go `GetReference`); it must end with `/`."""
    mirror = {"registry": spec.calico.registry.rstrip("/") + "/"} if spec.calico.registry else {}
    return [
        {
            "apiVersion": "operator.tigera.io/v1",
            "kind": "Installation",
            "metadata": {"name": "default"},
            "spec": {
                **mirror,
                "calicoNetwork": {
                    "ipPools": [
                        {
                            "name": "default-ipv4-ippool",
                            "cidr": spec.pod_cidr,
                            "blockSize": spec.calico.block_size,
                            "encapsulation": spec.calico.encapsulation,
                            "natOutgoing": "Enabled",
                            "nodeSelector": "all()",
                        }
                    ],
                    # The kubelet's node-ip is the management address; without this, Calico's
                    # first-found autodetection may pick the PVRDMA NIC.
                    "nodeAddressAutodetectionV4": {"kubernetes": "NodeInternalIP"},
                },
            },
        }
    ]
