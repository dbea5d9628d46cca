"""Issue 34's "done when", through the real program under mocks: with `mirror` set, nothing the stack
registers, applies or boots with points outside the mirror; no job installs anything at start; and
`stacks images` lists exactly the images the plan runs (plus the ones only the cluster pulls)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.k8s.node_bootstrap import ClusterSpec, UserDataRenderer
from stacks.environment.cluster_spec import cluster_spec
from stacks.environment.loader import (
    ENVIRONMENT_KEY,
    LICENSE_TOKEN_KEY,
    ConfigView,
    InvalidEnvironment,
    load_environment,
)
from stacks.tools.images.inventory import container_images, inventory, outside_plan_images
from stacks.tools.plan.command import kubernetes_objects, plan_stack
from tests.components.k8s.node_bootstrap.cluster_settings import CONTROL_PLANE_JOIN, HANDOFF_SIGNER_PEM
from tests.program.conftest import run_view, stack_view

REGISTRY = "registry.site.example:5000/gpucluster"
FILES = "https://files.site.example/gpucluster"
SITE_IMAGE = f"{REGISTRY}/site:25.06-1"
URL = re.compile(r"https?://[^\s\"'\\)]+")
INSTALLERS = ("apt-get", "dnf", "yum", "pip install", "git clone")


def _mirrored(edit: Any = None, *secrets: str) -> ConfigView:
    view = stack_view("dev")
    values = copy.deepcopy(dict(view.values))
    env = values[ENVIRONMENT_KEY]
    env["mirror"] = {"registry": REGISTRY, "files": FILES}
    env["jobs"]["siteImage"] = SITE_IMAGE
    env["jobs"]["sample"]["enabled"] = True  # the PyTorch sample too, beside the fabric check,
    env["jobs"]["workers"] = 2  # on two workers each, so both fit the four GPUs at once
    if edit:
        edit(env)
    return ConfigView(values=values, secret_keys=view.secret_keys | frozenset(secrets))


def _operator_and_tuning(env: dict[str, Any]) -> None:
    env["gpu"].update(
        mode="gpu-operator", gpuOperator={"driverRepository": f"{REGISTRY}/vgpu", "driverVersion": "550.127.05"}
    )
    env["jobs"]["sample"]["enabled"] = False
    env["jobs"]["fabricCheck"]["enabled"] = False
    env["kubernetes"]["gpuNodeTaint"] = False  # Katib's suggestion Deployments tolerate no taint
    env["kubernetes"]["version"] = "1.34.2"  # Katib 0.19.0 is tested upstream on 1.31-1.34 only
    env["tuning"] = {
        "enabled": True,
        "trainer": {"manifestUrl": f"{FILES}/git/kubeflow/trainer/tree/v2.3.0/manifests/overlays/manager"},
        "katib": {
            "dbStorageClass": "standard",
            "manifestUrl": f"{FILES}/git/kubeflow/katib/tree/v0.19.0/manifests/v1beta1/installs/katib-standalone",
        },
        "sample": {"enabled": True},
    }


VARIANTS = {
    "device-plugin+jobs": lambda: _mirrored(),
    "gpu-operator+kubeflow": lambda: _mirrored(_operator_and_tuning, LICENSE_TOKEN_KEY),
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def planned(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[ConfigView, Path]:
    view = VARIANTS[request.param]()
    out = tmp_path_factory.mktemp("plan")
    plan_stack(view, stack="dev", out_dir=out)
    return view, out


def _objects(out: Path) -> list[dict[str, Any]]:
    documents = [d for p in sorted((out / "manifests").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]
    return [d for d in documents if isinstance(d, dict)]  # a group holding a Secret is one redacted string


def test_the_plan_names_no_url_outside_the_mirror(planned: tuple[ConfigView, Path]) -> None:
    _, out = planned
    text = (out / "resources.json").read_text() + "".join(p.read_text() for p in (out / "manifests").glob("*.yaml"))
    outside = sorted({url for url in URL.findall(text) if not url.startswith(FILES + "/")})
    assert outside == []


def test_the_plan_runs_no_image_outside_the_mirror(planned: tuple[ConfigView, Path]) -> None:
    _, out = planned
    images = set(container_images(_objects(out)))
    assert images, "the plan runs some images"
    assert sorted(i for i in images if not i.startswith(REGISTRY + "/")) == []


def test_the_helm_chart_and_kubeflow_folders_come_from_the_mirror(planned: tuple[ConfigView, Path]) -> None:
    view, out = planned
    env = load_environment(view)
    resources = json.loads((out / "resources.json").read_text())["resources"]
    by_type: dict[str, list[dict[str, Any]]] = {}
    for resource in resources:
        by_type.setdefault(resource["type"], []).append(resource["inputs"])
    [crd] = by_type["kubernetes:yaml/v2:ConfigFile"]
    assert crd["file"] == "manifests/mpi-operator/v0.8.0/mpijobs.kubeflow.org.crd.yaml"
    if env.gpu.mode == "gpu-operator":
        [chart] = by_type["kubernetes:helm.sh/v4:Chart"]
        assert chart["chart"] == f"{FILES}/helm.ngc.nvidia.com/nvidia/charts/gpu-operator-v26.7.0.tgz"
        assert "repositoryOpts" not in chart
        values = chart["values"]
        assert values["toolkit"]["repository"] == f"{REGISTRY}/nvidia/k8s"
        assert values["node-feature-discovery"]["image"]["repository"] == f"{REGISTRY}/nfd/node-feature-discovery"
        assert values["driver"]["repository"] == f"{REGISTRY}/vgpu"
    if env.tuning.enabled:
        folders = sorted(d["directory"] for d in by_type["kubernetes:kustomize/v2:Directory"])
        assert all(f.startswith(FILES + "/") for f in folders) and len(folders) == 2


def test_no_job_installs_or_fetches_anything_at_start(planned: tuple[ConfigView, Path]) -> None:
    _, out = planned
    for obj in _objects(out):
        if obj["kind"] not in ("MPIJob", "TrainJob", "TrainingRuntime", "Experiment"):
            continue
        text = json.dumps(obj)
        assert [word for word in INSTALLERS if word in text] == [], obj["metadata"]["name"]


def test_the_first_boot_fetches_and_pulls_only_from_the_mirror() -> None:
    env = load_environment(_mirrored())
    spec = cluster_spec(env, ClusterSpec)
    renderer = UserDataRenderer(spec, token="abcdef.0123456789abcdef", ca_cert_hash="sha256:" + "0" * 64,
        control_plane_join=CONTROL_PLANE_JOIN, pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
    )
    for node in [*spec.control_plane_nodes, *spec.worker_nodes]:
        user_data = renderer.render(node.name)
        # The cluster's own API endpoints are shell variables; anything else is the mirror (its
        # file base, or its registry in containerd's hosts.toml).
        registry_server = "https://" + REGISTRY.split("/")[0]
        outside = [u for u in URL.findall(user_data) if not u.startswith((FILES + "/", "https://$")) and u != registry_server]
        assert outside == [], node.name
    init = renderer.render(spec.control_plane_nodes[0].name)
    assert f"GPUCLUSTER_CALICO_MANIFEST={FILES}/raw.githubusercontent.com/projectcalico/calico/v3.32.1/" in init
    assert f"GPUCLUSTER_IMAGE_REGISTRY={REGISTRY}" in init
    assert f"imageRepository: {REGISTRY}\n" in init
    assert f"registry: {REGISTRY}/\n" in init  # Calico's Installation


def test_images_round_trips_through_the_plan(planned: tuple[ConfigView, Path]) -> None:
    """Every image the plan (with its mirror) runs is a DEST of `stacks images` (computed from the
    plan *without* the mirror), and every other DEST is one the cluster pulls outside the plan."""
    view, out = planned
    env = load_environment(view)
    listed = inventory(view, stack="dev")
    in_plan = {i.dest for i in listed.images if i.where == "plan"}
    assert in_plan == set(container_images(_objects(out)))
    outside = {i.dest for i in listed.images if i.where != "plan"}
    assert len(outside) == len({i for i, _ in outside_plan_images(env)})
    assert all(i.dest.startswith(REGISTRY + "/") for i in listed.images)
    # Sources carry their registry, as skopeo and crane want it written.
    assert all(re.match(r"^[a-z0-9.-]+(\.[a-z]+|:\d+)/", i.source) for i in listed.images), listed.images
    assert len({i.dest for i in listed.images}) == len(listed.images)  # no two sources on one DEST


def test_the_site_image_runs_the_fabric_check_and_the_pytorch_sample() -> None:
    run = run_view(_mirrored(), "dev")
    jobs = [o for _, objs in kubernetes_objects(run.resources) for o in objs if o.get("kind") == "MPIJob"]
    assert {j["metadata"]["name"] for j in jobs} == {"nccl-fabric-check-roce", "pytorch-ddp-resnet50-roce"}
    assert set(container_images(jobs)) == {SITE_IMAGE}


def test_the_pytorch_sample_without_an_image_that_has_sshd_is_refused_by_key() -> None:
    def no_site_image(env: dict[str, Any]) -> None:
        del env["jobs"]["siteImage"]

    with pytest.raises(InvalidEnvironment) as raised:
        load_environment(_mirrored(no_site_image))
    assert any(
        p.startswith("vsphere-gpu-cluster:environment.jobs.siteImage: ") and "no sshd" in p
        for p in raised.value.problems
    )


def test_kubeflow_folders_outside_the_mirror_are_refused_by_key() -> None:
    def github_folders(env: dict[str, Any]) -> None:
        _operator_and_tuning(env)
        del env["tuning"]["trainer"]["manifestUrl"]
        env["tuning"]["katib"]["manifestUrl"] = "https://github.com/kubeflow/katib/tree/v0.19.0/manifests"

    with pytest.raises(InvalidEnvironment) as raised:
        load_environment(_mirrored(github_folders, LICENSE_TOKEN_KEY))
    text = "\n".join(raised.value.problems)
    assert "environment.tuning.trainer.manifestUrl: Trainer's manager overlay is a kustomize folder" in text
    assert "environment.tuning.katib.manifestUrl: https://github.com/kubeflow/katib" in text


def test_two_upstream_images_on_one_mirror_reference_are_refused_by_key() -> None:
    def docker_hub_prometheus(env: dict[str, Any]) -> None:
        # quay.io/prometheus/prometheus (the default) and Docker Hub's prometheus/prometheus differ
        # upstream but lose their hosts to the same mirror path.
        env["monitoring"] = {"prometheus": {"enabled": True, "image": "prometheus/prometheus:v3.5.3"}}
        env["jobs"]["fabricCheck"]["image"] = "quay.io/prometheus/prometheus:v3.5.3"

    with pytest.raises(InvalidEnvironment) as raised:
        inventory(_mirrored(docker_hub_prometheus), stack="dev")
    [problem] = raised.value.problems
    assert problem.startswith("vsphere-gpu-cluster:environment.mirror.registry: ")
    assert f"{REGISTRY}/prometheus/prometheus:v3.5.3" in problem


def test_validate_names_the_images_the_mirror_cannot_move(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stacks.cli import main

    def operator_with_foreign_driver_registry(env: dict[str, Any]) -> None:
        env["gpu"].update(
            mode="gpu-operator",
            gpuOperator={"driverRepository": "vgpu.corp.example/nvidia", "driverVersion": "550.127.05"},
        )

    view = _mirrored(operator_with_foreign_driver_registry, LICENSE_TOKEN_KEY)
    document = {"config": {**view.values, **{key: {"secure": "AAAA"} for key in view.secret_keys}}}
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    assert main(["validate", "dev", "--file", str(path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("mirror: not rewritten: ")]
    # The pod sandbox is no longer one of them: the bootstrap writes it (issue 42).
    assert len(lines) == 1
    assert lines[0].startswith("mirror: not rewritten: vgpu.corp.example/nvidia/driver:550.127.05-<os>: ")


def test_the_files_list_carries_jobsets_release_asset_with_tuning() -> None:
    """Trainer's overlay includes JobSet's manifest by URL, which no git mirror of Trainer holds:
    `stacks images --files` lists it (so `stacks bundle` carries it) at its place under the base."""
    listed = inventory(VARIANTS["gpu-operator+kubeflow"](), stack="dev").files
    jobset = "https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml"
    [entry] = [f for f in listed if f.source == jobset]
    assert entry.dest == f"{FILES}/github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml"
    assert all(f.source != jobset for f in inventory(_mirrored(), stack="dev").files)
