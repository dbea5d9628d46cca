"""The mirror mapping and the add-ons' own mirror settings, as pure functions."""

from __future__ import annotations

import pytest

from components.k8s.addons.gpu_operator import (
    CHART_IMAGE_SETTINGS,
    GpuOperatorArgs,
    chart_images,
    chart_values,
    mirror_values,
)
from components.k8s.addons.kubeflow_tuning import with_mirrored_images
from components.k8s.mirror import mirrored_image, mirrored_repository, mirrored_url, parse_image

MIRROR = "registry.site.example:5000/gpucluster"


@pytest.mark.parametrize(
    ("image", "full", "mirrored"),
    [
        (
            "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
            "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
            "nvidia/k8s-device-plugin:v0.20.0",
        ),
        (
            "mpioperator/mpi-operator:0.8.2",
            "docker.io/mpioperator/mpi-operator:0.8.2",
            "mpioperator/mpi-operator:0.8.2",
        ),
        ("mysql:8.0.29", "docker.io/library/mysql:8.0.29", "library/mysql:8.0.29"),
        ("localhost/x/y:1", "localhost/x/y:1", "x/y:1"),
        (
            "registry.k8s.io/coredns/coredns:v1.12.1",
            "registry.k8s.io/coredns/coredns:v1.12.1",
            "coredns/coredns:v1.12.1",
        ),
        ("other.example:5000/team/img", "other.example:5000/team/img", "team/img"),
        ("ghcr.io/a/b:1@sha256:" + "ab" * 32, "ghcr.io/a/b:1@sha256:" + "ab" * 32, "a/b:1@sha256:" + "ab" * 32),
    ],
)
def test_images_keep_path_tag_and_digest_and_lose_their_registry(image: str, full: str, mirrored: str) -> None:
    assert parse_image(image).full == full
    assert mirrored_image(image, MIRROR) == f"{MIRROR}/{mirrored}"
    assert mirrored_image(image, None) == image


def test_an_image_in_the_mirror_already_stays() -> None:
    assert mirrored_image(f"{MIRROR}/site:1", MIRROR) == f"{MIRROR}/site:1"


def test_files_keep_host_and_path_under_the_base() -> None:
    url = "https://raw.githubusercontent.com/projectcalico/calico/v3.31.3/manifests/tigera-operator.yaml"
    base = "https://files.site.example/m/"
    assert mirrored_url(url, base) == (
        "https://files.site.example/m/raw.githubusercontent.com/projectcalico/calico/v3.31.3/manifests/tigera-operator.yaml"
    )
    assert mirrored_url(url, None) == url
    assert mirrored_repository("nvcr.io/nvidia/k8s", MIRROR) == f"{MIRROR}/nvidia/k8s"


def test_every_gpu_operator_image_setting_moves_and_the_driver_stays_the_sites() -> None:
    args = GpuOperatorArgs(
        provider=None,  # type: ignore[arg-type]
        driver_repository="vgpu.corp.example/nvidia",
        driver_version="550.127.05",
        licensing_token="t",
        image_registry=MIRROR,
    )
    values = chart_values(args)
    for path, (repository, _, _) in CHART_IMAGE_SETTINGS.items():
        node = values
        for key in path:
            node = node[key]
        assert node["repository"] == f"{MIRROR}/{repository.split('/', 1)[1]}", path
    assert values["driver"]["repository"] == "vgpu.corp.example/nvidia"
    assert values["node-feature-discovery"]["gc"]["tolerations"]  # merged, not replaced
    assert mirror_values(None) == {}


def test_the_chart_image_list_follows_the_exporter_switch() -> None:
    with_exporter, without = chart_images(exporter=True), chart_images(exporter=False)
    assert set(with_exporter) - set(without) == {"nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless"}
    assert "registry.k8s.io/nfd/node-feature-discovery:v0.19.0" in without


def test_kubeflow_workloads_and_katib_config_move_to_the_mirror() -> None:
    deployment = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "c", "image": "ghcr.io/kubeflow/katib/katib-ui:v0.19.0"}]}}
        }
    }
    moved = with_mirrored_images("kubernetes:apps/v1:Deployment", deployment, MIRROR)
    assert moved is not None
    assert moved["spec"]["template"]["spec"]["containers"][0]["image"] == f"{MIRROR}/kubeflow/katib/katib-ui:v0.19.0"
    config = {
        "data": {
            "katib-config.yaml": "suggestion:\n  - algorithmName: tpe\n    image: ghcr.io/kubeflow/katib/suggestion-hyperopt:v0.19.0\n"
        }
    }
    moved = with_mirrored_images("kubernetes:core/v1:ConfigMap", config, MIRROR)
    assert moved is not None
    assert f"image: {MIRROR}/kubeflow/katib/suggestion-hyperopt:v0.19.0\n" in moved["data"]["katib-config.yaml"]
    assert with_mirrored_images("kubernetes:core/v1:Service", {"spec": {}}, MIRROR) is None
