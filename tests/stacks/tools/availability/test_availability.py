"""`python -m stacks verify STACK --availability`: a GPU pod must survive a device-plugin restart
and a kubelet restart on its node, and the node must recover. Run against the fake kubectl and ssh
(fake_cluster_bin.py), which replay what the real components do, one kubectl call at a time:
the DaemonSet's replacement plugin pod gets a new name and runs a few calls later; after `systemctl
restart kubelet` the API first still shows the old kubelet's status, then NotReady with the GPUs
at 0 (device manager checkpoint), then Ready, then the GPUs back."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacks.environment.loader import load_environment, read_stack_file
from stacks.environment.model import Environment, GpuOperatorSettings
from stacks.kubectl import Kubectl, VerifyError
from stacks.tools.verify.availability.objects import probe_pod
from stacks.tools.verify.availability.probe import PROBE_NAME, run_availability
from tests.components.k8s.jobs.fake_cluster import DEV_WORKERS, gpu_world, install, read_world
from tests.stack_fixtures import fixture_project_dir, fixture_stack

ROOT = Path(__file__).resolve().parents[4]


def dev() -> Environment:
    return load_environment(read_stack_file(fixture_stack("dev")))


def world(**extra: Any) -> dict[str, Any]:
    found = gpu_world()
    found.update(ssh={ip: name for name, ip in DEV_WORKERS.items()}, ssh_user="rocky", probe_name=PROBE_NAME)
    found.update(extra)
    return found


def check(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    the_world: dict[str, Any],
    *,
    node: str | None = None,
    ssh_user: str = "rocky",
    timeout_s: float = 600,
) -> tuple[bool, str]:
    env = install(tmp_path, the_world)
    monkeypatch.setenv("PATH", env["PATH"])
    clock = itertools.count(step=5)  # each look at the clock: 5 s later (one poll)
    verdict = run_availability(
        Kubectl(env["KUBECONFIG"], "training"),
        dev(),
        node=node,
        ssh_user=ssh_user,
        timeout_s=timeout_s,
        poll_s=5,
        sleep=lambda _: None,
        clock=lambda: float(next(clock)),
    )
    return verdict.passed, verdict.render()


def test_a_gpu_pod_survives_plugin_and_kubelet_restarts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    passed, report = check(tmp_path, monkeypatch, world())
    assert passed, report
    seen = read_world(tmp_path)
    # The probe asked for a GPU under the NVIDIA runtime and tolerated the GPU taint.
    assert "delete pod nvidia-device-plugin-1x20q" in " | ".join(seen["calls"])
    assert seen["ssh_calls"] == ["rocky@10.10.0.51 sudo systemctl restart kubelet"]
    assert "probe gpu-availability-probe on worker-1" in report
    assert "device plugin: pod nvidia-device-plugin-1x20q deleted; nvidia-device-plugin-" in report
    assert "kubelet: restarted; node went NotReady and came back Ready" in report
    assert "nvidia.com/gpu allocatable went to 0 and came back to 1" in report
    assert "probe still running: same uid, 0 restarts" in report
    # The probe is gone afterwards.
    assert not [p for p in seen["pods"] if p["metadata"]["name"] == PROBE_NAME]


def test_the_probe_pod_it_creates_is_a_gpu_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    the_world = world()
    check(tmp_path, monkeypatch, the_world, node="worker-3")
    seen = read_world(tmp_path)
    assert seen["ssh_calls"] == ["rocky@10.10.0.53 sudo systemctl restart kubelet"]
    [probe] = seen["created"]
    spec = probe["spec"]
    assert probe["metadata"]["name"] == PROBE_NAME
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "worker-3"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    [container] = spec["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert container["command"][0] == "sleep"
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_a_probe_restarted_by_the_kubelet_restart_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    passed, report = check(tmp_path, monkeypatch, world(probe_restarts_on_kubelet_restart=True))
    assert not passed
    assert "after the kubelet restart: probe restarted (restartCount 0 -> 1)" in report
    assert not [p for p in read_world(tmp_path)["pods"] if p["metadata"]["name"] == PROBE_NAME]


def test_a_node_that_does_not_come_back_fails_on_the_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = world(delays={"kubelet_status": 2, "kubelet_ready": 500, "gpus_back": 500})
    passed, report = check(tmp_path, monkeypatch, slow, timeout_s=120)
    assert not passed
    assert "kubelet restart: not within 2 min" in report
    assert "Ready False (KubeletNotReady)" in report


def test_ssh_refused_fails_and_still_removes_the_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    passed, report = check(tmp_path, monkeypatch, world(), ssh_user="ubuntu")
    assert not passed
    assert "Permission denied (publickey" in report
    assert not [p for p in read_world(tmp_path)["pods"] if p["metadata"]["name"] == PROBE_NAME]


def test_ssh_gets_the_node_after_a_double_dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--` ends ssh's options: whatever the user name, the destination cannot be read as one."""
    passed, report = check(tmp_path, monkeypatch, world())
    assert passed, report
    (argv,) = read_world(tmp_path)["ssh_argv"]
    assert argv[argv.index("rocky@10.10.0.51") - 1] == "--"


@pytest.mark.parametrize("user", ["-oProxyCommand=touch /tmp/pwned", "rocky x", "ro;cky", "", "r" * 33])
def test_an_ssh_user_that_is_not_a_user_name_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user: str
) -> None:
    with pytest.raises(VerifyError, match="--ssh-user"):
        check(tmp_path, monkeypatch, world(), ssh_user=user)
    seen = read_world(tmp_path)
    assert "ssh_argv" not in seen
    assert not [p for p in seen["pods"] if p["metadata"]["name"] == PROBE_NAME]


def cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = install(tmp_path, world())
    return subprocess.run(
        [sys.executable, "-m", "stacks", "verify", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=fixture_project_dir(),
        timeout=120,
    )


def test_help_shows_the_availability_check(tmp_path: Path) -> None:
    result = cli("--help", tmp_path=tmp_path)
    assert result.returncode == 0
    for flag in ("--availability", "--confirm", "--disrupt-protected", "--ssh-user", "--node", "--timeout-minutes"):
        assert flag in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("dev", "--availability", "--ssh-user", "rocky"), "--confirm dev"),
        (("dev", "--availability", "--ssh-user", "rocky", "--confirm", "prod"), "--confirm dev"),
        (("dev", "--availability", "--confirm", "dev"), "--ssh-user"),
        (("dev", "--availability", "--confirm", "dev", "--ssh-user", "rocky", "--node", "master"), "worker-1"),
        (
            ("dev", "--availability", "--confirm", "dev", "--ssh-user", "rocky", "--timeout-minutes", "0"),
            "--timeout-minutes",
        ),
        (("dev", "--node", "worker-1"), "only with --availability"),
        (("dev", "--availability", "--confirm", "dev", "--ssh-user=-oProxyCommand=sh"), "--ssh-user"),
    ],
)
def test_guards_refuse_before_touching_the_cluster(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = cli(*args, tmp_path=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert "calls" not in read_world(tmp_path)


def test_a_protected_stack_needs_disrupt_protected(tmp_path: Path) -> None:
    view = yaml.safe_load((fixture_stack("dev")).read_text())
    view["config"]["vsphere-gpu-cluster:environment"]["protect"] = True
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(yaml.safe_dump(view))
    result = cli(
        "dev", "--file", str(stack), "--availability", "--confirm", "dev", "--ssh-user", "rocky", tmp_path=tmp_path
    )
    assert result.returncode == 2
    assert "protect: true" in result.stderr and "--disrupt-protected" in result.stderr
    assert "calls" not in read_world(tmp_path)


def test_in_gpu_operator_mode_the_probe_runs_an_image_with_sleep_the_nodes_have() -> None:
    """The operator runs the distroless dcgm-exporter build, which has no `sleep`: the probe would
    crash-loop. Its validator image runs on every GPU node with `sleep infinity`."""
    base = dev()
    operator = GpuOperatorSettings.model_validate(
        {"driverRepository": "registry.example.com/nvidia", "driverVersion": "570.172.08"}
    )
    env = base.model_copy(
        update={"gpu": base.gpu.model_copy(update={"mode": "gpu-operator", "gpu_operator": operator})}
    )
    [container] = probe_pod(env, "worker-1")["spec"]["containers"]
    assert container["image"] == "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v26.7.0"
    assert container["image"] != env.monitoring.exporter_image
    assert container["command"] == ["sleep", "infinity"]
    [device_plugin_mode] = probe_pod(base, "worker-1")["spec"]["containers"]
    assert device_plugin_mode["image"] == base.monitoring.exporter_image
