"""The pinned upstream manifests (manifests/index.json): every pin in the code has its entry, the
vendored MPIJob CRD its checksum, and Calico's manifest only its URL and checksum."""

from __future__ import annotations

import copy
import hashlib
import json
import typing
from pathlib import Path

import pytest
import yaml

from components.k8s import vendored as vendored_module
from components.k8s.addons.mpi_operator import MpiOperatorSettings
from components.k8s.facts import DEFAULT_CALICO_VERSION
from components.k8s.node_bootstrap import ClusterSpec
from components.k8s.vendored import (
    CALICO_OPERATOR,
    INDEX,
    MPI_OPERATOR_CRD,
    REPO_ROOT,
    ManifestChecksumError,
    ManifestNotPinned,
    PinnedManifest,
    pinned,
    pinned_manifests,
)
from stacks.environment.cluster_spec import cluster_spec
from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, InvalidEnvironment, load_environment
from stacks.environment.model import MpiOperatorSettings as MpiOperatorKeys
from stacks.environment.stack_file import read_stack_file
from tests.stack_fixtures import fixture_stack

MPI_RELEASES = typing.get_args(MpiOperatorKeys.model_fields["version"].annotation)
"""The MPI Operator releases a stack may choose: read from the code's own pins, so adding one
without its entry fails here."""
REFERENCE_CRD_SHA256 = "e5e5d63363af289f37e8dfe00b45d4115cbd4dab61fe0840d8e1781f7c7c24e2"
"""mpijobs.kubeflow.org-v0.8.0.crd.yaml as the project's shared/reference provides it."""


@pytest.mark.parametrize("release", MPI_RELEASES)
def test_every_mpi_operator_release_applies_the_vendored_crd_with_the_recorded_checksum(release: str) -> None:
    manifest = pinned(MPI_OPERATOR_CRD, release)
    assert manifest.path is not None
    assert hashlib.sha256(manifest.file.read_bytes()).hexdigest() == manifest.sha256 == REFERENCE_CRD_SHA256
    assert (
        manifest.url
        == "https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.8.0/deploy/v2beta1/mpi-operator.yaml"
    )
    assert (
        MpiOperatorSettings(version=release).crd_source == "manifests/mpi-operator/v0.8.0/mpijobs.kubeflow.org.crd.yaml"
    )


def test_the_index_lists_only_files_that_exist_and_nothing_unlisted_sits_beside_them() -> None:
    listed = {m.file.resolve() for m in pinned_manifests() if m.path is not None}
    on_disk = {p.resolve() for p in INDEX.parent.rglob("*") if p.is_file() and p != INDEX}
    assert listed == on_disk


def test_calicos_manifest_is_pinned_by_url_and_checksum_and_not_in_the_repository() -> None:
    calico = [m for m in pinned_manifests() if m.name == CALICO_OPERATOR]
    assert DEFAULT_CALICO_VERSION in {m.version for m in calico}
    for manifest in calico:
        assert manifest.path is None
        assert manifest.url == (
            f"https://raw.githubusercontent.com/projectcalico/calico/{manifest.version}/manifests/tigera-operator.yaml"
        )
        assert len(manifest.sha256) == 64 and int(manifest.sha256, 16) >= 0
        assert manifest.operator_image is not None and manifest.operator_image.startswith("quay.io/tigera/operator:v")
    assert not list(REPO_ROOT.glob("**/tigera-operator.yaml"))
    with pytest.raises(ManifestNotPinned, match="pinned by SHA-256 only"):
        _ = pinned(CALICO_OPERATOR, DEFAULT_CALICO_VERSION).file


def test_the_mpijob_crd_copy_is_the_crd_the_jobs_are_checked_against() -> None:
    crd = yaml.safe_load(pinned(MPI_OPERATOR_CRD, "0.8.2").file.read_text())
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == "mpijobs.kubeflow.org"
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v2beta1"]


def test_a_release_without_an_entry_is_refused_by_name() -> None:
    with pytest.raises(ManifestNotPinned, match=r"calico-tigera-operator for v3\.99\.0 .*recorded: v3\.31\.3"):
        pinned(CALICO_OPERATOR, "v3.99.0")


def test_a_copy_whose_bytes_changed_is_refused_before_it_is_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = pinned(MPI_OPERATOR_CRD, "0.8.2")
    assert original.path is not None
    root = tmp_path / "repo"
    copy = root / original.path
    copy.parent.mkdir(parents=True)
    copy.write_bytes(original.file.read_bytes() + b"# edited\n")
    monkeypatch.setattr(vendored_module, "REPO_ROOT", root)
    with pytest.raises(ManifestChecksumError, match=r"SHA-256 [0-9a-f]{64} is not the e5e5d633"):
        original.verified_bytes()
    with pytest.raises(ManifestChecksumError):
        _ = MpiOperatorSettings().crd_source


def test_an_index_entry_with_a_changed_checksum_does_not_match_its_file() -> None:
    entry = json.loads(INDEX.read_text())["manifests"][0]
    changed = PinnedManifest(
        name=entry["name"],
        version=entry["version"],
        releases=tuple(entry["releases"]),
        path=pinned(entry["name"], entry["version"]).path,
        url=entry["url"],
        sha256="0" * 64,
        source=entry["source"],
    )
    with pytest.raises(ManifestChecksumError, match="restore the file"):
        changed.verified_bytes()


def _dev_with_calico(version: str) -> ConfigView:
    view = read_stack_file(fixture_stack("dev"))
    values = copy.deepcopy(dict(view.values))
    values[ENVIRONMENT_KEY]["kubernetes"].setdefault("cni", {})["version"] = version
    return ConfigView(values=values, secret_keys=view.secret_keys)


def test_a_calico_release_without_a_recorded_checksum_is_refused_by_key_naming_those_with_one() -> None:
    with pytest.raises(InvalidEnvironment) as raised:
        load_environment(_dev_with_calico("v3.32.5"))
    [problem] = [p for p in raised.value.problems if "kubernetes.cni.version" in p]
    assert problem.startswith(
        "vsphere-gpu-cluster:environment.kubernetes.cni.version: Calico v3.32.5 has no recorded SHA-256"
    )
    assert "(v3.31.3, v3.30.3, v3.32.0, v3.32.1)" in problem


def test_a_calico_release_with_a_recorded_checksum_boots_with_it_and_needs_no_copy() -> None:
    env = load_environment(_dev_with_calico("v3.32.0"))
    spec = cluster_spec(env, ClusterSpec)
    assert spec.calico.manifest_sha256 == "e48fe027f8be3d9136a012a32450f1eabc4c5257c0b76083cd1ab32316637d47"
