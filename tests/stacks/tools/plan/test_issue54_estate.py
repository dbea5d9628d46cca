"""Issue 54 items 1-2 on its own estate (tests/six_by_two.py): 6 hosts x 2 L40S, one worker per
host. The plan's workers carry both vGPUs with their 64-bit MMIO size printed, and the fabric
check runs one rank per GPU on every worker (12 ranks, six workers named), or `plan` refuses it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from stacks.environment.loader import ENVIRONMENT_KEY, load_environment, read_stack_file
from stacks.tools.plan.admission.check import AdmissionReport, admission_report
from stacks.tools.plan.command import plan_stack
from stacks.tools.plan.template_note import gpu_template_lines, gpu_template_note
from tests.six_by_two import PROFILES, WORKERS, six_by_two_document, six_by_two_stack

FABRIC = "MPIJob training/nccl-fabric-check-roce"


def _plan(folder: Path, document: dict[str, Any] | None = None) -> tuple[Any, Any, AdmissionReport]:
    path = six_by_two_stack(folder)
    if document is not None:
        path.write_text(yaml.safe_dump(document, sort_keys=False))
    view = read_stack_file(path)
    env = load_environment(view)
    result = plan_stack(view, stack="estate", out_dir=folder / "plan")
    return env, result, admission_report(env, result.run)


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, AdmissionReport]:
    return _plan(tmp_path_factory.mktemp("estate"))


def _verdict(report: AdmissionReport, workload: str) -> Any:
    [verdict] = [v for v in report.verdicts if v.workload == workload]
    return verdict


def test_every_worker_carries_both_vgpus_and_plan_prints_the_mmio_size(planned: Any) -> None:
    env, result, _ = planned
    attachments = {
        r.redacted_inputs()["vm_name"]: r.redacted_inputs()
        for r in result.run.resources
        if r.type == "gpucluster:vsphere:VgpuAttachment"
    }
    assert sorted(attachments) == [f"estate-gpu-{w}" for w in WORKERS]
    for inputs in attachments.values():
        assert inputs["profiles"] == PROFILES
        assert inputs["extra_config"]["pciPassthru.64bitMMIOSizeGB"] == "256"
    [line] = gpu_template_lines(env)
    assert line == (
        "GPU worker template rocky9-k8s-vgpu-l40s-2x48c (6 GPU worker(s) cloned from it): 2 vGPU devices "
        "(nvidia_l40s-48c, nvidia_l40s-48c); firmware efi, 64-bit MMIO 256 GB (pciPassthru.64bitMMIOSizeGB)"
    )
    assert gpu_template_note(env)["mmioSizeGb"] == 256


def test_the_fabric_check_names_all_six_workers_and_uses_twelve_gpus(planned: Any) -> None:
    _, result, report = planned
    verdict = _verdict(report, FABRIC)
    assert verdict.status == "OK", verdict
    assert all(worker in verdict.detail for worker in WORKERS), verdict.detail
    assert "12 ranks on all 12 GPUs (slotsPerWorker 2)" in verdict.detail
    [job] = [
        o
        for p in sorted((Path(result.manifest_files[0]).parent).glob("*.yaml"))
        for o in yaml.safe_load_all(p.read_text())
        if o and o.get("kind") == "MPIJob"
    ]
    assert job["spec"]["slotsPerWorker"] == 2
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 6
    assert worker["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 2
    command = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "all_reduce_perf" in command and " -np 12 " in command


def test_plan_refuses_a_fabric_check_on_part_of_the_workers(tmp_path: Path) -> None:
    document = six_by_two_document()
    document["config"][ENVIRONMENT_KEY]["jobs"]["workers"] = 3
    _, _, report = _plan(tmp_path, document)

    verdict = _verdict(report, FABRIC)

    assert verdict.status == "FAIL"
    assert "no rank on worker-4, worker-5, worker-6 (3 of 6 GPU workers)" in verdict.detail
    assert "6 rank(s) for the workers' 12 GPUs" in verdict.detail
    assert "leave jobs.workers unset" in verdict.detail
    assert report.failures == [verdict]  # plan exits 2 (cli.py: EXIT_INVALID on any FAIL)


def test_the_plan_command_prints_the_template_line_and_exits_2_on_a_partial_fabric_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stacks.cli import main

    path = six_by_two_stack(tmp_path)
    assert main(["plan", "estate", "--file", str(path), "--out", str(tmp_path / "ok")]) == 0
    printed = capsys.readouterr().out
    assert "firmware efi, 64-bit MMIO 256 GB (pciPassthru.64bitMMIOSizeGB)" in printed
    assert "12 ranks on all 12 GPUs (slotsPerWorker 2)" in printed

    document = six_by_two_document()
    document["config"][ENVIRONMENT_KEY]["jobs"]["workers"] = 3
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    assert main(["plan", "estate", "--file", str(path), "--out", str(tmp_path / "partial")]) == 2
    captured = capsys.readouterr()
    assert f"FAIL {FABRIC}: no rank on worker-4, worker-5, worker-6" in captured.out
    assert f"error: 1 workload(s) cannot run: {FABRIC}" in captured.err


def test_validate_refuses_the_benchmark_beside_a_fabric_check_that_holds_every_gpu(tmp_path: Path) -> None:
    """The fabric check holds all 12 GPUs; the benchmark's 6 one-GPU pods beside it could deadlock.
    The rule counted the fabric check at the benchmark's one slot per worker (6 + 6 <= 12) and let
    it through to the program, which then refused it with a ValueError."""
    from stacks.environment.loader import InvalidEnvironment

    document = six_by_two_document()
    document["config"][ENVIRONMENT_KEY]["jobs"]["sample"]["enabled"] = True
    document["config"][ENVIRONMENT_KEY]["jobs"]["siteImage"] = "registry.site.example/gpucluster/site:25.06-1"
    path = six_by_two_stack(tmp_path)
    path.write_text(yaml.safe_dump(document, sort_keys=False))

    with pytest.raises(InvalidEnvironment) as refused:
        load_environment(read_stack_file(path))

    [problem] = refused.value.problems
    assert "need 6 and 12 GPUs at once, but the workers have 12" in problem


def test_the_estate_picture_notes_the_gpu_template_with_its_mmio(planned: Any) -> None:
    from stacks.tools.plan.estate_picture import estate_dot

    env, result, _ = planned
    dot = estate_dot(env, result.run.resources, result.timing, stack="estate")
    assert "GPU workers': 2 vGPU devices (nvidia_l40s-48c, nvidia_l40s-48c); firmware efi, 64-bit MMIO 256 GB" in dot
