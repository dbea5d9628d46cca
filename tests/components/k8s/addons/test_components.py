"""The add-on components under the SDK's mock runtime: what they register, on which provider,
with which parents and dependencies, and that the licensing token stays secret."""

from __future__ import annotations

import os
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components.k8s.addons import (
    DevicePluginSettings,
    GpuDevicePlugin,
    GpuDevicePluginArgs,
    GpuOperatorArgs,
    MpiOperator,
    MpiOperatorArgs,
    MpiOperatorSettings,
    RdmaDevicePlugin,
    RdmaDevicePluginArgs,
)
from components.k8s.addons.gpu_operator import CHART_REPOSITORY
from stacks.tools.plan.mock_runtime import ProgramRun, RecordedResource, contains_secret, run_program
from tests.components.k8s.addons.k8s_checks import check_policy, validate_strict

os.environ["PULUMI_ERROR_OUTPUT_STRING"] = "true"

TOKEN = "nls-client-configuration-token-value"


def operator_args(provider: k8s.Provider) -> GpuOperatorArgs:
    return GpuOperatorArgs(
        provider=provider,
        driver_repository="registry.example/nvidia",
        driver_version="550.127.05",
        licensing_token=pulumi.Output.secret(TOKEN),
        driver_image_pull_secrets=["registry-pull"],
    )


def run(build: Any) -> ProgramRun:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1\nkind: Config\n")
        build(provider)

    return run_program(program, project="vsphere-gpu-cluster", stack="test", config={}, secret_keys=[])


def all_addons(provider: k8s.Provider) -> None:
    GpuDevicePlugin("gpu", GpuDevicePluginArgs(provider=provider))
    RdmaDevicePlugin("rdma", RdmaDevicePluginArgs(provider=provider))
    MpiOperator("mpi", MpiOperatorArgs(provider=provider))


def objs_of(resource: RecordedResource) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = resource.plain_inputs()["objs"]
    return objs


def test_type_tokens_and_parents() -> None:
    result = run(all_addons)
    types = {r.name: r.type for r in result.resources}
    assert types["gpu"] == "gpucluster:kubernetes:GpuDevicePlugin"
    assert types["rdma"] == "gpucluster:kubernetes:RdmaDevicePlugin"
    assert types["mpi"] == "gpucluster:kubernetes:MpiOperator"
    for child, parent in (
        ("gpu-objects", "gpu"),
        ("rdma-objects", "rdma"),
        ("mpi-objects", "mpi"),
        ("mpi-crd", "mpi"),
    ):
        assert result.named(child).parent == result.urn_of(parent)


def test_every_kubernetes_resource_uses_the_explicit_provider() -> None:
    result = run(all_addons)
    provider_urn = result.urn_of("k8s")
    for resource in result.resources:
        if resource.type.startswith("kubernetes:"):
            assert resource.provider is not None and resource.provider.startswith(provider_urn), resource.name


def test_add_ons_do_not_depend_on_each_other() -> None:
    result = run(all_addons)
    owners = {"gpu": "gpu", "rdma": "rdma", "mpi": "mpi"}
    urn_owner: dict[str, str] = {}
    for resource in result.resources:
        for prefix, owner in owners.items():
            if resource.name == prefix or resource.name.startswith(f"{prefix}-"):
                urn_owner[resource.urn] = owner
    for resource in result.resources:
        owner = urn_owner.get(resource.urn)
        if owner is None:
            continue
        foreign = {urn_owner[d] for d in resource.dependencies if d in urn_owner} - {owner}
        assert not foreign, f"{resource.name} depends on {foreign}"


def test_registered_objects_are_valid_and_follow_house_rules() -> None:
    result = run(all_addons)
    groups = result.by_type("kubernetes:yaml/v2:ConfigGroup")
    assert {g.name for g in groups} == {"gpu-objects", "rdma-objects", "mpi-objects"}
    for group in groups:
        objs = objs_of(group)
        for obj in objs:
            validate_strict(obj)
        check_policy(objs)


def test_mpi_operator_installs_the_pinned_crd_before_its_objects() -> None:
    result = run(all_addons)
    crd = result.named("mpi-crd")
    assert crd.type == "kubernetes:yaml/v2:ConfigFile"
    # The vendored copy, relative to the project directory: preview fetches nothing.
    assert crd.plain_inputs()["file"] == "manifests/mpi-operator/v0.8.0/mpijobs.kubeflow.org.crd.yaml"
    assert crd.urn in result.named("mpi-objects").dependencies


def test_mpi_operator_can_leave_the_crd_to_someone_else() -> None:
    result = run(
        lambda p: MpiOperator("mpi", MpiOperatorArgs(provider=p, settings=MpiOperatorSettings(install_crd=False)))
    )
    assert not result.by_type("kubernetes:yaml/v2:ConfigFile")
    # Only the cluster provider: with no CRD to install there is nothing else to wait for.
    assert result.named("mpi-objects").dependencies == [result.urn_of("k8s")]


def test_gpu_operator_mode_installs_the_pinned_chart_with_vgpu_licensing() -> None:
    result = run(
        lambda p: GpuDevicePlugin(
            "gpu", GpuDevicePluginArgs(provider=p, mode="gpu-operator", gpu_operator=operator_args(p))
        )
    )
    operator = result.named("gpu-operator")
    assert operator.type == "gpucluster:kubernetes:GpuOperator"
    assert operator.parent == result.urn_of("gpu")
    assert not [r for r in result.resources if r.name == "gpu-objects"]  # no static plugin
    chart = result.named("gpu-operator-chart")
    assert chart.type == "kubernetes:helm.sh/v4:Chart"
    inputs = chart.plain_inputs()
    assert inputs["chart"] == "gpu-operator"
    assert inputs["version"] == "v26.7.0"
    assert inputs["repositoryOpts"] == {"repo": CHART_REPOSITORY}
    assert inputs["namespace"] == "gpu-operator"
    driver = inputs["values"]["driver"]
    assert driver["repository"] == "registry.example/nvidia"
    assert driver["version"] == "550.127.05"
    assert driver["imagePullSecrets"] == ["registry-pull"]
    assert driver["licensingConfig"] == {"secretName": "licensing-config", "nlsEnabled": True}
    assert "configMapName" not in driver["licensingConfig"]
    assert set(chart.dependencies) >= {
        result.urn_of("gpu-operator-namespace"),
        result.urn_of("gpu-operator-licensing"),
    }


@pytest.mark.parametrize("token_is_secret", [True, False])
def test_licensing_token_is_secret_end_to_end(token_is_secret: bool) -> None:
    def build(p: k8s.Provider) -> None:
        args = operator_args(p)
        if not token_is_secret:
            args = GpuOperatorArgs(
                provider=p,
                driver_repository=args.driver_repository,
                driver_version=args.driver_version,
                licensing_token=TOKEN,
            )
        GpuDevicePlugin("gpu", GpuDevicePluginArgs(provider=p, mode="gpu-operator", gpu_operator=args))

    result = run(build)
    licensing = result.named("gpu-operator-licensing")
    assert contains_secret(licensing.inputs)
    assert TOKEN not in repr(licensing.redacted_inputs())
    [secret] = objs_of(licensing)
    assert secret["kind"] == "Secret"
    assert secret["stringData"]["client_configuration_token.tok"] == TOKEN
    assert "FeatureType=1" in secret["stringData"]["gridd.conf"]
    validate_strict(secret)
    # Nothing else carries the token, and the namespace stays readable in a plan.
    for resource in result.resources:
        if resource.name != "gpu-operator-licensing":
            assert TOKEN not in repr(resource.plain_inputs()), resource.name
    assert not contains_secret(result.named("gpu-operator-namespace").inputs)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda p: GpuDevicePluginArgs(provider=p, mode="gpu-operator"), "needs gpu_operator"),
        (
            lambda p: GpuDevicePluginArgs(
                provider=p,
                mode="gpu-operator",
                gpu_operator=operator_args(p),
                device_plugin=DevicePluginSettings(fail_on_init_error=False),
            ),
            "do not apply with mode 'gpu-operator'",
        ),
        (
            lambda p: GpuDevicePluginArgs(provider=p, gpu_operator=operator_args(p)),
            "only used with mode 'gpu-operator'",
        ),
        (
            lambda p: GpuDevicePluginArgs(
                provider=p,
                mode="gpu-operator",
                gpu_operator=operator_args(k8s.Provider("other", kubeconfig="x")),
            ),
            "same provider",
        ),
        (
            lambda p: GpuOperatorArgs(provider=p, driver_repository="", driver_version="1", licensing_token="t"),
            "driver_repository and driver_version are required",
        ),
        (
            lambda p: GpuOperatorArgs(
                provider=p,
                driver_repository="r",
                driver_version="1",
                licensing_token="t",
                chart_version="latest",
            ),
            "pin chart_version",
        ),
    ],
)
def test_conflicting_options_are_rejected(build: Any, message: str) -> None:
    errors: list[str] = []

    def program(p: k8s.Provider) -> None:
        try:
            build(p)
        except ValueError as error:
            errors.append(str(error))

    result = run(program)
    assert len(errors) == 1 and message in errors[0], errors
    assert not [r for r in result.resources if r.type.startswith("gpucluster:")]
