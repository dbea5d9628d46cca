"""Rules for what a stack fetches: the pinned manifests it applies, the `mirror` key, and jobs that
must run on images carrying what they need (issue 34: nothing fetched at preview, deploy or job
start).
"""

from __future__ import annotations

from collections.abc import Iterator

from components.k8s.vendored import (
    CALICO_OPERATOR,
    MPI_OPERATOR_CRD,
    ManifestChecksumError,
    ManifestNotPinned,
    pinned,
    pinned_releases,
)
from stacks.environment.model import Environment
from stacks.environment.registry import Path, Problem, rule
from stacks.environment.rules.software import calico_supports_the_kubernetes_version

SITE_IMAGE_FIX = "build images/site/Dockerfile (docs/air-gapped.md) and set jobs.siteImage to it"


def _vendored_problem(path: Path, name: str, version: str) -> Problem | None:
    try:
        pinned(name, version).verified_bytes()
    except (ManifestNotPinned, ManifestChecksumError) as error:
        return Problem(path, str(error))
    return None


@rule
def pinned_manifests_are_recorded(env: Environment) -> Iterator[Problem]:
    """Preview and deploy apply the vendored MPIJob CRD (one missing or changed is found here), and
    the first boot checks Calico's fetched manifest against its recorded checksum (a release with
    none could not boot), before anything runs."""
    # A Calico release refused for the Kubernetes version is reported once, by that rule.
    if env.kubernetes.mode == "bootstrap" and not list(calico_supports_the_kubernetes_version(env)):
        version = env.kubernetes.cni.version
        if version not in pinned_releases(CALICO_OPERATOR):
            yield Problem(
                ("kubernetes", "cni", "version"),
                f"Calico {version} has no recorded SHA-256 of its tigera-operator.yaml in manifests/index.json, so "
                "the first boot could not check the file it fetches; choose a release that has one ("
                f"{', '.join(pinned_releases(CALICO_OPERATOR))}) or add the release's entry (url, sha256)",
            )
    if env.mpi_operator.crd_url is None:
        problem = _vendored_problem(("mpiOperator", "version"), MPI_OPERATOR_CRD, env.mpi_operator.version)
        if problem:
            yield problem


def _url_keys(env: Environment) -> list[tuple[Path, str | None]]:
    return [
        (("kubernetes", "cni", "operatorManifestUrl"), env.kubernetes.cni.operator_manifest_url),
        (("mpiOperator", "crdUrl"), env.mpi_operator.crd_url),
        (("tuning", "trainer", "manifestUrl"), env.tuning.trainer.manifest_url),
        (("tuning", "katib", "manifestUrl"), env.tuning.katib.manifest_url),
    ]


@rule
def fetched_files_come_from_the_mirror(env: Environment) -> Iterator[Problem]:
    files = env.mirror.files
    if not files:
        return
    base = files.rstrip("/") + "/"
    for path, url in _url_keys(env):
        if url is not None and "://" in url and not url.startswith(base):
            yield Problem(path, f"{url} is outside mirror.files {files}; serve the file there, or unset this key")
    tuning = env.tuning
    if tuning.enabled:
        # Kustomize folders, not files: their build needs the folder (and Trainer's JobSet release
        # asset), which no plain file base serves (manifests/index.json, not_vendored).
        folders = [("trainer", "Trainer's manager overlay", tuning.trainer.manifest_url)]
        if tuning.katib.enabled:
            folders.append(("katib", "Katib's standalone install", tuning.katib.manifest_url))
        for key, what, url in folders:
            if url is None:
                yield Problem(
                    ("tuning", key, "manifestUrl"),
                    f"{what} is a kustomize folder on GitHub, which an air-gapped deploy cannot build; set it to "
                    "your git mirror's copy of the release's folder (under mirror.files) or a local path",
                )


@rule
def jobs_run_on_images_that_carry_what_they_need(env: Environment) -> Iterator[Problem]:
    jobs = env.jobs
    sample = jobs.sample
    if sample.enabled and sample.benchmark == "pytorch-ddp" and not (sample.image or jobs.site_image):
        yield Problem(
            ("jobs", "siteImage"),
            "the PyTorch sample's default image (NVIDIA's PyTorch) has no sshd and jobs install nothing at start; "
            f"{SITE_IMAGE_FIX} (or set jobs.sample.image to an image with sshd)",
        )
    if sample.enabled and sample.benchmark == "tf-cnn-benchmarks" and not sample.script_path:
        yield Problem(
            ("jobs", "sample", "scriptPath"),
            "tf_cnn_benchmarks is no longer cloned at job start: build an image with the scripts "
            "(docs/air-gapped.md), set jobs.sample.image to it and this key to the script's path",
        )


def unrewritten_images(env: Environment) -> list[str]:
    """Images the stack runs that `mirror.registry` does not move, each with the reason; empty
    without a mirror. `validate` prints them."""
    registry = env.mirror.registry
    if not registry:
        return []
    notes: list[str] = []
    operator = env.gpu.gpu_operator
    in_mirror = operator is not None and operator.driver_repository.startswith(registry.rstrip("/") + "/")
    if env.gpu.mode == "gpu-operator" and operator is not None and not in_mirror:
        notes.append(
            f"{operator.driver_repository}/driver:{operator.driver_version}-<os>: the vGPU guest driver, from "
            "gpu.gpuOperator.driverRepository (your own registry, outside mirror.registry)"
        )
    return notes


def trust_warnings(env: Environment) -> list[str]:
    """A registry reached over TLS with no `caBundle`: valid (its certificate may come from a public
    CA the nodes already trust), but a site registry's seldom does, and then every node fails its
    first boot pulling the sandbox image. `validate` prints it; `preflight` asks the registry."""
    mirror = env.mirror
    if mirror.registry is None or mirror.ca_bundle is not None or mirror.plain_http:
        return []
    servers = f"mirror.registry {mirror.registry.split('/')[0]}" + (
        f" and mirror.files {mirror.files}" if mirror.files else ""
    )
    return [
        f"mirror.caBundle: not set, so the nodes trust {servers} only through their system CAs; a certificate "
        "signed by a site CA fails at the first boot on every node. Paste that CA's certificate (PEM) into "
        "mirror.caBundle, or set mirror.plainHttp: true for a registry without TLS on a trusted network (fine as "
        "it is only for a certificate from a public CA; `python -m stacks preflight` asks the registry)"
    ]
