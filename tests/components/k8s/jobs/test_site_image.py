"""The site image's Dockerfile carries what the jobs expect of it, at the paths they use."""

from __future__ import annotations

from pathlib import Path

from components.k8s.facts import PYTORCH_IMAGE
from components.k8s.jobs.fabric_check import ALL_REDUCE_PERF
from components.k8s.jobs.verbs import PROVIDER_GLOB

DOCKERFILE = (Path(__file__).resolve().parents[4] / "images" / "site" / "Dockerfile").read_text()


def test_it_is_built_on_the_pytorch_samples_image() -> None:
    assert f"ARG BASE={PYTORCH_IMAGE}\n" in DOCKERFILE


def test_its_build_fails_without_the_pvrdma_provider_sshd_or_all_reduce_perf() -> None:
    assert f"ls {PROVIDER_GLOB}" in DOCKERFILE
    assert "test -x /usr/sbin/sshd" in DOCKERFILE
    assert f"test -x {ALL_REDUCE_PERF}" in DOCKERFILE


def test_nccl_tests_is_pinned_by_commit() -> None:
    [line] = [line for line in DOCKERFILE.splitlines() if line.startswith("ARG NCCL_TESTS_COMMIT=")]
    assert len(line.split("=", 1)[1]) == 40
