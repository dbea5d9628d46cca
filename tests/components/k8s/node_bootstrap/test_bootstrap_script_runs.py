"""The node bootstrap script, executed: real bash in a temporary root, recording stand-ins for
the tools (node_harness.py, standins/standin.sh). A clean first boot of each role, a boot cut at
every step that changes the node, re-runs after a join, a late API server, and the failures that
must be loud (missing RDMA devices, driver, toolkit)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from components.k8s.node_bootstrap import ClusterPki, ClusterSpec, UserDataRenderer, node_role
from tests.components.k8s.node_bootstrap.cluster_settings import (
    CLUSTER_CA_HASH,
    CONTROL_PLANE_JOIN,
    HANDOFF_SIGNER_PEM,
    PEM_FIELDS,
    TEST_ENCRYPTION_KEYS,
    cluster_settings,
)
from tests.components.k8s.node_bootstrap.control_plane_world import stack_wrote_the_secrets
from tests.components.k8s.node_bootstrap.node_harness import CALICO_MANIFEST_SHA256, Node

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the bootstrap script needs bash")

TOKEN = "abc123.0123456789abcdef"
CA_HASH = CLUSTER_CA_HASH  # a real CA's pin: the joining control-plane nodes check it with openssl
PKI = ClusterPki(
    **{name: f"-----BEGIN TEST-----\n{name}\n-----END TEST-----\n" for name in PEM_FIELDS},
    secrets_encryption_keys=TEST_ENCRYPTION_KEYS,
)
CALICO = "https://raw.githubusercontent.com/projectcalico/calico/v3.31.3/manifests/tigera-operator.yaml"
FETCHED = "/var/lib/gpucluster/tigera-operator.yaml"


def make_spec(**overrides: object) -> ClusterSpec:
    return ClusterSpec(**cluster_settings(**overrides))


def make_node(
    tmp_path: Path,
    name: str,
    *,
    spec: ClusterSpec | None = None,
    without: tuple[str, ...] = (),
    pvrdma: str = "vmw_pvrdma0",
) -> Node:
    """`pvrdma`: the RDMA device's name when the bootstrap starts (GPU worker only); by default a
    RHEL-family template's, whose rdma-core keeps kernel names."""
    renderer = UserDataRenderer(
        spec or make_spec(),
        token=TOKEN,
        ca_cert_hash=CA_HASH,
        control_plane_join=CONTROL_PLANE_JOIN,
        pki_handoff_signer_pem=HANDOFF_SIGNER_PEM,
    )
    node = Node(tmp_path / name, renderer.render(name), name, without=without)
    node.with_containerd()
    if name == "gpu-1":
        node.with_gpu()
        node.with_pvrdma(pvrdma)
    if name != "cp-1":
        node.set("api-up")  # the first control-plane node is up: the others can join
    if node_role(spec or make_spec(), name) == "control-plane":
        stack_wrote_the_secrets(node, spec or make_spec(), PKI, CONTROL_PLANE_JOIN)
    if node_role(spec or make_spec(), name) == "init":
        node.stack_delivers_pki(spec or make_spec(), PKI)
    return node


def assert_never_harmed(node: Node) -> None:
    """What must hold after any sequence of boots of any node."""
    assert not node.has("reset-on-joined-node"), "kubeadm reset on a node that had joined"
    assert not node.has("reset-wiped-etcd"), "kubeadm reset deleted etcd's data"
    assert not node.has("minted-ca"), "kubeadm made its own CA: the shared PKI was not installed"
    assert not node.calls_of("dnf") and not node.calls_of("yum") and not node.calls_of("apt-get")


def assert_bootstrapped(node: Node) -> None:
    assert node.done
    assert_never_harmed(node)
    # The token and the staged keys are gone once the node is bootstrapped.
    assert not node.file("/etc/kubernetes/kubeadm-config.yaml").exists()
    assert not node.file("/var/lib/gpucluster/pki").exists()


# --- clean first boots --------------------------------------------------------------------------


def test_first_control_plane_node_inits_once_installs_calico_and_keeps_the_shared_ca(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-1")
    assert node.boot().returncode == 0
    assert_bootstrapped(node)
    assert len(node.calls_of("kubeadm init --config")) == 1
    assert node.lines("inits") == ["init"]
    assert not node.calls_of("kubeadm reset")
    assert node.file("/etc/kubernetes/pki/ca.key").read_text() == PKI.ca_key_pem
    # The pinned manifest, fetched once and applied from the checked local copy.
    assert node.lines("fetched") == [CALICO]
    assert node.lines("applied") == [
        str(node.file(FETCHED)),
        str(node.file("/etc/kubernetes/calico-installation.yaml")),
    ]
    # Calico only once the API answers with admin credentials, after init.
    calls = node.calls
    assert calls.index(next(c for c in calls if c.startswith("kubeadm init --config"))) < calls.index(
        next(c for c in calls if c.startswith("kubectl"))
    )
    assert node.calls_of("modprobe") == ["modprobe overlay", "modprobe br_netfilter"]
    assert "#/dev/sda2 none swap sw 0 0" in node.file("/etc/fstab").read_text()


def test_second_control_plane_node_joins_with_the_shared_pki(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-2")
    assert node.boot().returncode == 0
    assert_bootstrapped(node)
    assert node.lines("joins") == ["joined"]
    assert node.lines("etcd-members") == ["cp-2"]
    # kubeadm's download-certs wrote it from kubeadm-certs (the stand-in's content): not user-data.
    assert node.file("/etc/kubernetes/pki/ca.key").read_text() == "downloaded ca.key\n"
    assert not node.calls_of("kubeadm reset")
    assert not node.calls_of("kubectl")


def test_gpu_worker_loads_rdma_modules_configures_the_nvidia_handler_then_joins(tmp_path: Path) -> None:
    node = make_node(tmp_path, "gpu-1")
    assert node.boot().returncode == 0
    assert_bootstrapped(node)
    calls = node.calls
    for module in ("ib_umad", "ib_uverbs", "rdma_ucm"):
        assert f"modprobe {module}" in calls
    for device in ("rdma_cm", "umad0", "uverbs0"):
        assert node.file(f"/dev/infiniband/{device}").exists()
    configure = node.calls_of("nvidia-ctk runtime configure --runtime")
    assert len(configure) == 1
    assert "--runtime=containerd" in configure[0] and "--nvidia-runtime-name=nvidia" in configure[0]
    assert not node.has("nvidia-set-as-default"), "the NVIDIA runtime must not become containerd's default"
    assert node.has("containerd-restarted")
    join = calls.index("kubeadm join --config " + str(node.file("/etc/kubernetes/kubeadm-config.yaml")))
    assert calls.index("systemctl restart containerd") < join
    assert calls.index("modprobe ib_umad") < join
    assert node.lines("joins") == ["joined"]
    # containerd's merged configuration now has the handler the `nvidia` RuntimeClass names.
    dropin = node.file("/etc/containerd/conf.d/99-nvidia.toml").read_text()
    assert "containerd.runtimes.nvidia]" in dropin


@pytest.mark.parametrize("version", [2, 3])
def test_the_nvidia_handler_is_configured_only_when_containerd_lacks_it(tmp_path: Path, version: int) -> None:
    node = make_node(tmp_path, "gpu-1")
    node.with_containerd(version)
    assert node.boot().returncode == 0
    assert len(node.calls_of("nvidia-ctk runtime configure --runtime")) == 1
    # Another template that already had it configured: nothing to do, containerd not restarted.
    again = make_node(tmp_path / "again", "gpu-1")
    config = again.file("/etc/containerd/config.toml")
    config.write_text(node.file("/etc/containerd/config.toml").read_text().replace(str(node.root), str(again.root)))
    dropin = again.file("/etc/containerd/conf.d/99-nvidia.toml")
    dropin.parent.mkdir(parents=True)
    dropin.write_text(node.file("/etc/containerd/conf.d/99-nvidia.toml").read_text())
    assert again.boot().returncode == 0
    assert not again.calls_of("nvidia-ctk runtime")
    assert not again.has("containerd-restarted")


@pytest.mark.parametrize("with_its_table", [False, True], ids=["table-missing", "table-present"])
def test_a_single_quoted_default_runtime_of_containerd_2_is_checked(tmp_path: Path, with_its_table: bool) -> None:
    """containerd 2.x's `config dump` writes strings in single quotes (`default_runtime_name =
    'crun'`, go-toml v2), 1.x in double quotes: the default runtime is read in both styles, so a
    lost table of a non-runc default is not taken for runc's."""
    node = make_node(tmp_path, "gpu-1")
    node.with_containerd(3)
    table = (
        "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.crun]\n  runtime_type = 'io.containerd.runc.v2'\n"
        # The default runtime's own SystemdCgroup is what the kubelet's systemd driver must match.
        "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.crun.options]\n  SystemdCgroup = true\n"
    )
    config = node.file("/etc/containerd/config.toml")
    config.write_text(
        config.read_text()
        + "[plugins.'io.containerd.cri.v1.runtime'.containerd]\n  default_runtime_name = 'crun'\n"
        + (table if with_its_table else "")
    )

    run = node.start()

    if with_its_table:
        assert run.returncode == 0, run.output
        assert node.lines("joins") == ["joined"]
    else:
        assert run.returncode != 0
        assert "lost its default runtime" in run.output
        assert not node.lines("joins")


def test_gpu_operator_mode_leaves_containerd_to_the_operator(tmp_path: Path) -> None:
    node = make_node(
        tmp_path, "gpu-1", spec=make_spec(configure_nvidia_runtime=False), without=("nvidia-smi", "nvidia-ctk")
    )
    assert node.boot().returncode == 0
    assert not node.calls_of("nvidia-")
    # One restart, for the sandbox image and config_path the script writes on every node; no runtime added.
    assert node.calls_of("systemctl restart containerd") == ["systemctl restart containerd"]
    assert "nvidia" not in node.file("/etc/containerd/config.toml").read_text()


# --- the RDMA device's name on the first boot ----------------------------------------------------


def test_a_device_rdma_core_renamed_before_our_rule_is_named_vmw_pvrdma_before_joining(tmp_path: Path) -> None:
    """A Debian/Ubuntu template: udev ran rdma-core's NAME_FALLBACK rule before cloud-init wrote the
    NAME_KERNEL one, and NAME_KERNEL never renames back; NCCL_IB_HCA=vmw_pvrdma would match nothing."""
    node = make_node(tmp_path, "gpu-1", pvrdma="rocep11s0")
    run = node.boot()
    assert run.returncode == 0, run.output
    assert sorted(p.name for p in node.file("/sys/class/infiniband").iterdir()) == ["vmw_pvrdma0"]
    calls = node.calls
    rename = calls.index("rdma dev set rocep11s0 name vmw_pvrdma0")
    assert rename < calls.index("kubeadm join --config " + str(node.file("/etc/kubernetes/kubeadm-config.yaml")))
    assert "rocep11s0 renamed vmw_pvrdma0" in run.output


def test_a_boot_cut_after_the_rename_finds_the_kernels_name_next_time(tmp_path: Path) -> None:
    reference = make_node(tmp_path / "reference", "gpu-1", pvrdma="rocep11s0")
    assert reference.boot().returncode == 0
    number = reference.calls.index("rdma dev set rocep11s0 name vmw_pvrdma0") + 1
    node = make_node(tmp_path / "cut", "gpu-1", pvrdma="rocep11s0")
    node.cut_power_at(number, "after")
    assert node.boot().power_cut
    node.restore_power()
    assert node.boot().returncode == 0
    assert node.calls_of("rdma dev set") == ["rdma dev set rocep11s0 name vmw_pvrdma0"]
    assert sorted(p.name for p in node.file("/sys/class/infiniband").iterdir()) == ["vmw_pvrdma0"]


def test_a_device_with_the_kernels_name_is_left_alone(tmp_path: Path) -> None:
    node = make_node(tmp_path, "gpu-1")
    assert node.boot().returncode == 0
    assert not node.calls_of("rdma ")
    assert node.file("/sys/class/infiniband/vmw_pvrdma0").exists()


def test_a_renamed_device_without_the_rdma_tool_fails_before_joining(tmp_path: Path) -> None:
    node = make_node(tmp_path, "gpu-1", pvrdma="rocep11s0", without=("rdma",))
    run = node.start()
    assert run.returncode == 1
    assert "RDMA device rocep11s0 is not named vmw_pvrdma0" in run.output and "iproute2" in run.output
    assert not node.calls_of("kubeadm")


def test_a_rename_the_kernel_refuses_stops_the_boot_before_joining(tmp_path: Path) -> None:
    """A failed `rdma dev set` leaves the device under a name NCCL_IB_HCA=vmw_pvrdma never matches:
    a node that joined anyway would run every job over sockets. The boot stops, naming the device."""
    node = make_node(tmp_path, "gpu-1", pvrdma="rocep11s0")
    node.set("rdma-rename-refused", "Device or resource busy")
    run = node.start()
    assert run.returncode == 1, run.output
    assert "could not rename RDMA device rocep11s0 to vmw_pvrdma0" in run.output
    assert node.calls_of("rdma dev set") == ["rdma dev set rocep11s0 name vmw_pvrdma0"]
    assert not node.calls_of("kubeadm")


# --- loud failures before the node joins --------------------------------------------------------


def test_missing_rdma_device_files_fail_loudly_before_joining(tmp_path: Path) -> None:
    node = make_node(tmp_path, "gpu-1")
    (node.sim / "pvrdma-present").unlink()  # no PVRDMA device: no uverbs/umad device files
    run = node.start()
    assert run.returncode == 1
    assert "RDMA device files missing" in run.output
    assert "/dev/infiniband/uverbs*" in run.output and "/dev/infiniband/umad*" in run.output
    assert "rdma_cm" not in run.output.split("missing:")[1].split(".")[0]
    assert not node.calls_of("kubeadm")


@pytest.mark.parametrize(
    ("missing", "message"),
    [("nvidia-smi", "nvidia-smi not found"), ("nvidia-ctk", "nvidia-ctk not found")],
)
def test_missing_driver_or_toolkit_fails_loudly_before_joining(tmp_path: Path, missing: str, message: str) -> None:
    node = make_node(tmp_path, "gpu-1", without=(missing,))
    run = node.start()
    assert run.returncode == 1
    assert message in run.output
    assert not node.calls_of("kubeadm")


@pytest.mark.parametrize("version", ["1.17.7", "1.16.2", "1.9.10"])
def test_a_toolkit_older_than_the_cve_2025_23266_fix_stops_the_bootstrap(tmp_path: Path, version: str) -> None:
    """Toolkits before 1.17.8 let a container image reach host root through the toolkit's hook:
    the node must not join with one, nor get containerd's NVIDIA runtime from it."""
    node = make_node(tmp_path, "gpu-1")
    node.set("nvidia-ctk-version", version)
    run = node.start()
    assert run.returncode == 1
    assert f"NVIDIA Container Toolkit {version} is older than 1.17.8" in run.output
    assert "CVE-2025-23266" in run.output
    assert not node.calls_of("nvidia-ctk runtime configure --runtime")
    assert not node.calls_of("kubeadm")


@pytest.mark.parametrize("version", ["1.17.8", "1.17.10", "1.18.0", "2.0.0"])
def test_a_toolkit_with_the_fix_is_accepted(tmp_path: Path, version: str) -> None:
    node = make_node(tmp_path, "gpu-1")
    node.set("nvidia-ctk-version", version)
    run = node.boot()
    assert run.returncode == 0, run.output
    assert node.calls_of("nvidia-ctk --version")
    assert node.calls_of("nvidia-ctk runtime configure --runtime")


# --- late API server, failed joins -------------------------------------------------------------


def test_worker_keeps_waiting_for_a_late_api_server_then_joins(tmp_path: Path) -> None:
    node = make_node(tmp_path, "gpu-1")
    (node.sim / "api-up").unlink()
    node.set("api-late", 150)  # 150 failed checks: beyond the 120 (30 minutes) the old script allowed
    run = node.start(timeout=120)
    assert run.returncode == 0, run.output
    assert len(node.calls_of("curl")) == 151
    assert node.calls_of("sleep 60")  # backoff, capped
    assert node.lines("joins") == ["joined"]
    assert not node.lines("failures")
    assert_bootstrapped(node)


def test_a_join_that_fails_before_the_kubelet_registered_is_cleaned_up_and_retried(tmp_path: Path) -> None:
    node = make_node(tmp_path, "gpu-1")
    node.set("fail-join-at", "tls-bootstrap")
    assert node.boot().returncode == 0
    assert len(node.calls_of("kubeadm reset")) == 1  # the node had not joined: reset is safe
    assert node.lines("joins") == ["joined"]
    assert_bootstrapped(node)


def test_etcd_busy_joins_are_retried_without_reset(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-2")
    node.set("join-failures", 3)
    assert node.boot().returncode == 0
    assert not node.calls_of("kubeadm reset")
    assert node.lines("joins") == ["joined"]


# --- re-runs and cut boots ----------------------------------------------------------------------


def test_control_plane_failing_its_calico_apply_is_never_reset_and_finishes_on_the_next_start(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-1")
    node.set("kubectl-failures", 20)  # the first start gives up applying Calico
    first = node.start()
    assert first.returncode == 1
    assert node.boot().returncode == 0
    assert len(node.calls_of("kubeadm init --config")) == 1
    assert not node.calls_of("kubeadm reset")
    assert node.lines("applied")[-2:] == [
        str(node.file(FETCHED)),
        str(node.file("/etc/kubernetes/calico-installation.yaml")),
    ]
    assert_bootstrapped(node)


def test_kubeadm_init_failing_after_admin_conf_is_completed_by_phases_not_reset(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-1")
    node.set("fail-init-at", "wait-control-plane")
    assert node.start().returncode == 1
    node.set("api-late", 2)  # the control plane comes up a little later
    assert node.boot().returncode == 0
    assert len(node.calls_of("kubeadm init --config")) == 1
    assert not node.calls_of("kubeadm reset")
    assert node.lines("cluster-state") == [
        "upload-config",
        "mark-control-plane",
        "bootstrap-token",
        "kubelet-finalize",
        "addon",
    ]
    assert_bootstrapped(node)


@pytest.mark.parametrize("name", ["cp-1", "cp-2", "gpu-1"])
def test_a_node_that_is_bootstrapped_does_nothing_when_run_again(tmp_path: Path, name: str) -> None:
    node = make_node(tmp_path, name)
    assert node.boot().returncode == 0
    calls = len(node.calls)
    assert node.start().returncode == 0
    assert len(node.calls) == calls


@pytest.mark.parametrize("name", ["cp-1", "cp-2"])
@pytest.mark.parametrize("lost", ["done-marker", "state-dir"])
def test_a_control_plane_run_again_after_it_joined_never_resets(tmp_path: Path, name: str, lost: str) -> None:
    """The done-marker lost (or the run cut right before writing it), or all of our state under
    /var/lib/gpucluster: every stage finds kubeadm's own evidence and nothing is undone."""
    node = make_node(tmp_path, name)
    assert node.boot().returncode == 0
    calls = len(node.calls)
    if lost == "done-marker":
        node.file("/var/lib/gpucluster/bootstrap.done").unlink()
    else:
        shutil.rmtree(node.file("/var/lib/gpucluster"))
    assert node.boot().returncode == 0
    assert not node.calls_of("kubeadm reset")
    assert not [call for call in node.calls[calls:] if call.startswith(("kubeadm", "kubectl"))]
    assert not node.lines("failures")
    assert node.done


def test_a_control_plane_cut_before_its_done_marker_with_its_files_back_changes_nothing(tmp_path: Path) -> None:
    """The harshest re-run: the first-boot files in place again (kubeadm config included) on a
    control plane that has initialised; the script must still find its evidence."""
    node = make_node(tmp_path, "cp-1")
    assert node.boot().returncode == 0
    node.file("/var/lib/gpucluster/bootstrap.done").unlink()
    node.cloud_init_writes_files()
    assert node.boot().returncode == 0
    assert not node.calls_of("kubeadm reset")
    assert len(node.calls_of("kubeadm init --config")) == 1
    assert not node.lines("failures")
    assert_bootstrapped(node)


def test_a_control_plane_join_failing_after_the_kubelet_registered_is_completed_not_reset(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-2")
    node.set("fail-join-at", "control-plane-join")
    assert node.boot().returncode == 0
    assert not node.calls_of("kubeadm reset")
    assert node.calls_of("kubeadm join phase control-plane-join all")
    assert node.lines("etcd-members") == ["cp-2"]
    assert_bootstrapped(node)


# Every call that changes the node or the cluster, where a cut boot matters.
EFFECTFUL = ("kubeadm", "kubectl", "nvidia-ctk", "systemctl restart", "modprobe ib_", "modprobe rdma", "rdma dev")


@pytest.mark.parametrize("name", ["cp-1", "cp-2", "gpu-1"])
def test_a_boot_cut_at_any_step_recovers_on_the_next_boot(tmp_path: Path, name: str) -> None:
    reference = make_node(tmp_path / "reference", name)
    assert reference.boot().returncode == 0
    cut_points = [n for n, call in enumerate(reference.calls, start=1) if call.startswith(EFFECTFUL)]
    assert cut_points
    for number in cut_points:
        for mode in ("before", "after"):
            node = make_node(tmp_path / f"cut-{number}-{mode}", name)
            node.cut_power_at(number, mode)
            run = node.boot()
            assert run.power_cut, f"{name}: no power cut at call {number} ({mode})"
            node.restore_power()
            assert node.boot().returncode == 0, f"{name}: cut {mode} {node.lines('cut-call')}: {node.runs[-1].output}"
            where = f"{name}, cut {mode} {node.lines('cut-call')}"
            assert node.done, where
            assert_never_harmed(node)
            assert len(node.lines("inits")) == (1 if name == "cp-1" else 0), where
            assert len(node.lines("joins")) <= 1, where
            if name != "cp-1":
                assert node.file("/etc/kubernetes/kubelet.conf").exists(), where
            if name == "cp-2":
                assert node.lines("etcd-members") == ["cp-2"], where
            if name == "cp-1":
                assert not node.calls_of("kubeadm reset"), where
                assert node.lines("applied")[-1].endswith("calico-installation.yaml"), where


INIT_PHASES = ["certs", "kubeconfig", "etcd", "control-plane", "kubelet-start", "wait-control-plane", "upload-config",
               "mark-control-plane", "bootstrap-token", "kubelet-finalize", "addon"]  # fmt: skip
JOIN_POINTS = {"cp-2": ["control-plane-prepare", "tls-bootstrap", "control-plane-join"], "gpu-1": ["tls-bootstrap"]}


@pytest.mark.parametrize(
    ("name", "phase"),
    [("cp-1", phase) for phase in INIT_PHASES] + [(name, p) for name, points in JOIN_POINTS.items() for p in points],
)
def test_a_boot_cut_inside_kubeadm_recovers_on_the_next_boot(tmp_path: Path, name: str, phase: str) -> None:
    """The power lost while kubeadm init or join is between two of its phases: what the earlier
    phases wrote stays, the rest never happened."""
    node = make_node(tmp_path, name)
    node.set("cut-in", phase)
    assert node.boot().power_cut
    run = node.boot()
    assert run.returncode == 0, run.output
    assert_never_harmed(node)
    assert node.done
    if name == "cp-1":
        assert not node.calls_of("kubeadm reset")
        assert node.lines("applied")[-1].endswith("calico-installation.yaml")
        if phase in ("certs", "kubeconfig"):  # cut before admin.conf: init runs again, from scratch
            assert node.lines("inits") == ["init"]
        else:  # admin.conf written: completed by phases, never a second init
            assert len(node.calls_of("kubeadm init --config")) == 1
            assert node.lines("cluster-state")[-5:] == INIT_PHASES[-5:]
    else:
        assert node.file("/etc/kubernetes/kubelet.conf").exists()
    if name == "cp-2":
        assert node.lines("etcd-members") == ["cp-2"]


# --- the pinned Calico manifest ------------------------------------------------------------------


def test_a_calico_manifest_with_other_bytes_is_refused_and_nothing_is_applied(tmp_path: Path) -> None:
    node = make_node(tmp_path, "cp-1")
    (node.sim / "calico-manifest").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: evil}\n")
    run = node.start()
    assert run.returncode != 0
    assert f"not the pinned {CALICO_MANIFEST_SHA256}" in run.output
    assert not [line for line in node.lines("applied") if "tigera-operator" in line]
    assert not node.file(FETCHED).exists()


def test_with_a_mirror_the_operator_image_is_pulled_from_it_and_the_manifest_fetched_there(tmp_path: Path) -> None:
    spec = make_spec()
    spec = dataclasses.replace(
        spec,
        calico=dataclasses.replace(
            spec.calico, registry="registry.site.example/mirror", files="https://files.site.example/m"
        ),
    )
    node = make_node(tmp_path, "cp-1", spec=spec)
    assert node.boot().returncode == 0
    assert node.lines("fetched") == [
        "https://files.site.example/m/raw.githubusercontent.com/projectcalico/calico/v3.31.3/manifests/tigera-operator.yaml"
    ]
    applied = node.file(FETCHED).read_text()
    assert "image: registry.site.example/mirror/tigera/operator:v1.40.3" in applied
    assert "quay.io" not in applied
