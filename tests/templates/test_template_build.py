"""The template build (templates/) checked offline: Packer cannot run here, so a syntax test.

- the Packer HCL parses (python-hcl2) and builds what templates/README.md says: vsphere-iso for
  vcenter.template, vsphere-clone of it for vcenter.gpuTemplate with the vGPU device and all memory
  reserved, each with the snapshot, converted to a template; defaults equal to Pulumi.dev.yaml;
- the kickstart passes `ksvalidator` (pykickstart) for RHEL 9;
- the kickstart installs and enables what the node bootstrap relies on (the commands its script
  runs, mapped to the packages that provide them on Rocky 9), at the stack's Kubernetes version.

Without python-hcl2 or pykickstart (requirements-dev.txt) the tests skip, except under CI=true.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components.k8s.gpu_runtime import MINIMUM_NVIDIA_CONTAINER_TOOLKIT as MINIMUM
from components.k8s.version_policy import containerd_refusal, policy_for
from components.vsphere.gpu_template import TOOLKIT_VERSION_KEY, TemplateFacts, gpu_template_build, toolkit_findings
from components.vsphere.vgpu.profiles import mmio_size_gb
from components.vsphere.vgpu.template_step import main as template_step_main
from stacks.environment.loader import load_environment, read_stack_file
from tests.stack_fixtures import fixture_stack

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"
KICKSTART = TEMPLATES / "rocky9" / "ks.cfg"
BASE_HCL = TEMPLATES / "packer" / "base" / "rocky9.pkr.hcl"
GPU_HCL = TEMPLATES / "packer" / "gpu" / "rocky9-vgpu.pkr.hcl"
BOOTSTRAP = ROOT / "components" / "k8s" / "node_bootstrap" / "files" / "gpucluster-bootstrap.sh"

COMMAND_PACKAGES = {
    # command the bootstrap script runs -> the Rocky 9 package that provides it
    "kubeadm": "kubeadm",
    "kubectl": "kubectl",
    "systemctl": "systemd",
    "curl": "curl",
    "modprobe": "kmod",
    "swapoff": "util-linux",
    "sysctl": "procps-ng",
    "containerd": "containerd.io",
    # the first control-plane node's key hand-off (components/vsphere/key_handoff.py): named in
    # ks.cfg, not left to @minimal-environment, which does not promise them
    "openssl": "openssl",
    "tar": "tar",
    "gzip": "gzip",
    "vmware-rpctool": "open-vm-tools",
}
"""Everything else the bootstrap needs on the guest, which no command name shows."""
GUEST_PACKAGES = {
    "cloud-init",  # reads guestinfo: the node's user-data, which installs and starts the bootstrap
    "open-vm-tools",  # cloud-init's VMware datasource reads guestinfo through it
    "kubelet",
    "cri-tools",
    "conntrack-tools",  # kubeadm preflight
    "socat",  # kubeadm preflight
    "iproute-tc",  # kubeadm preflight
    "rdma-core",  # ib_umad, ib_uverbs, rdma_ucm and /dev/infiniband for the RDMA device plugin
    "libibverbs-utils",
    # A joining control-plane node opens its sealed encryption keys in Python with `cryptography`
    # (AES-256-CTR), so that no key is on openssl's command line (gpucluster-bootstrap.sh,
    # open_sealed_program); named, since @minimal-environment does not promise it. Without it: the
    # openssl fallback, with a warning.
    "python3-cryptography",
}
FIREWALL_UNIT = ROOT / "components" / "k8s" / "node_bootstrap" / "files" / "gpucluster-firewall.service"
SERVICES = {"vmtoolsd", "containerd", "kubelet", "sshd"}
"""Enabled in the template: cloud-init needs vmtoolsd; the bootstrap's unit runs After=containerd."""


def _need(module: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        message = f"{module} is not installed (pip install -r requirements-dev.txt)"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def _hcl_file(path: Path) -> dict[str, Any]:
    hcl2 = _need("hcl2")
    with path.open() as handle:
        return dict(hcl2.load(handle))


def _hcl(path: Path) -> dict[str, Any]:
    """The build `path` belongs to as Packer reads it: every *.pkr.hcl of its folder, the link to
    the shared file included, its top-level blocks merged."""
    merged: dict[str, Any] = {}
    for each in sorted(path.parent.glob("*.pkr.hcl")):
        for kind, blocks in _hcl_file(each).items():
            merged.setdefault(kind, []).extend(blocks)
    return merged


def _unquote(value: Any) -> Any:
    return value.strip('"') if isinstance(value, str) else value


def _blocks(document: dict[str, Any], kind: str) -> dict[str, Any]:
    """`source "TYPE" "NAME" {...}` -> {"TYPE.NAME": body}; `variable "N" {...}` -> {"N": body}."""
    found: dict[str, Any] = {}
    for block in document.get(kind, []):
        for label, body in block.items():
            if kind == "source":
                for name, inner in body.items():
                    found[f"{_unquote(label)}.{_unquote(name)}"] = inner
            else:
                found[_unquote(label)] = body
    return found


def _defaults(document: dict[str, Any]) -> dict[str, Any]:
    return {name: _unquote(body.get("default")) for name, body in _blocks(document, "variable").items()}


def _locals(document: dict[str, Any]) -> dict[str, Any]:
    return {name: value for block in document.get("locals", []) for name, value in block.items()}


def _kickstart() -> Any:
    _need("pykickstart")
    from pykickstart.parser import KickstartParser
    from pykickstart.version import RHEL9, makeVersion

    parser = KickstartParser(makeVersion(RHEL9))
    parser.readKickstart(str(KICKSTART))
    return parser.handler


@pytest.fixture(scope="module")
def dev() -> Any:
    return load_environment(read_stack_file(fixture_stack("dev")))


def test_ksvalidator_accepts_the_kickstart() -> None:
    _need("pykickstart")
    result = subprocess.run(
        [sys.executable, "-m", "pykickstart.commands.ksvalidator", "-v", "RHEL9", str(KICKSTART)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0 and "No module named" in result.stderr:
        ksvalidator = Path(sys.executable).parent / "ksvalidator"
        result = subprocess.run([str(ksvalidator), "-v", "RHEL9", str(KICKSTART)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_kickstart_installs_what_the_bootstrap_runs(dev: Any) -> None:
    handler = _kickstart()
    packages = set(handler.packages.packageList)
    names = {re.sub(r"-\d[\w.*]*$", "", p) for p in packages}
    script = BOOTSTRAP.read_text()
    for command, package in COMMAND_PACKAGES.items():
        # The map stays honest: each command really appears in the bootstrap.
        assert re.search(rf"(^|[\s(\"'`|;]){re.escape(command)}\b", script, re.M), command
        assert package in names or package == "systemd", f"{command}: {package} is not in ks.cfg"
    assert names >= GUEST_PACKAGES, GUEST_PACKAGES - names
    # Kubernetes at exactly the stack's version; the repository of its minor.
    version = dev.kubernetes.version
    for package in ("kubeadm", "kubelet", "kubectl"):
        assert f"{package}-{version}" in packages, f"ks.cfg must pin {package}-{version}"
    minor = ".".join(version.split(".")[:2])
    assert all(f"/v{minor}/rpm/" in r.baseurl for r in handler.repo.repoList if r.name == "kubernetes")
    assert f"/v{minor}/rpm/" in KICKSTART.read_text().split("%post", 1)[1]


def test_the_kickstart_seals_a_guest_the_bootstrap_can_run_on() -> None:
    handler = _kickstart()
    assert set(handler.services.enabled) >= SERVICES
    assert not [p for p in handler.partition.partitions if p.mountpoint == "swap"], "the kubelet refuses swap"
    from pykickstart.constants import KS_SCRIPT_POST, SELINUX_PERMISSIVE

    assert handler.selinux.selinux == SELINUX_PERMISSIVE
    assert handler.rootpw.lock
    post = "\n".join(script.script for script in handler.scripts if script.type == KS_SCRIPT_POST)
    assert "datasource_list: [ VMware, None ]" in post
    assert "SystemdCgroup = true" in post
    assert "firewalld" in handler.packages.excludedList


def test_the_base_template_is_a_vsphere_iso_build_of_the_kickstart(dev: Any) -> None:
    document = _hcl(BASE_HCL)
    [(name, source)] = _blocks(document, "source").items()
    assert name == "vsphere-iso.rocky9"
    defaults = _defaults(document)
    assert defaults["template_name"] == dev.vcenter.template
    assert defaults["snapshot_name"] == dev.vcenter.template_snapshot
    assert defaults["hardware_version"] == dev.vm.hardware_version
    assert defaults["disk_gb"] >= max(dev.control_plane.disk_gb, dev.gpu_workers.disk_gb)
    assert source["create_snapshot"] is True and source["snapshot_name"] == "${var.snapshot_name}"
    assert source["convert_to_template"] is True
    assert _unquote(source["firmware"]) == "efi"
    [cd_file] = source["cd_files"]
    assert (BASE_HCL.parent / _unquote(cd_file).removeprefix("${path.root}/")).resolve() == KICKSTART
    assert source["shutdown_command"] == "${local.seal_command}"  # cloud-init clean: ../shared
    [build] = document["build"]
    assert [_unquote(s) for s in build["sources"]] == ["source.vsphere-iso.rocky9"]


def test_the_gpu_template_is_a_clone_of_the_base_with_its_vgpu(dev: Any) -> None:
    document = _hcl(GPU_HCL)
    [(name, source)] = _blocks(document, "source").items()
    assert name == "vsphere-clone.rocky9_vgpu"
    defaults = _defaults(document)
    assert defaults["base_template"] == dev.vcenter.template == _defaults(_hcl(BASE_HCL))["template_name"]
    assert defaults["template_name"] == dev.vcenter.gpu_template
    assert defaults["snapshot_name"] == dev.vcenter.template_snapshot
    assert [_unquote(p) for p in defaults["vgpu_profiles"]] == list(dev.gpu_workers.vgpu_profiles)
    assert defaults["memory_mb"] == dev.gpu_workers.memory_mb
    assert defaults["mmio_size_gb"] == gpu_template_build(dev.gpu_workers.vgpu_profiles).mmio_size_gb == 0  # grid_t4
    assert source["template"] == "${var.base_template}"
    assert source["linked_clone"] is False
    assert source["vgpu_profile"] == "${var.vgpu_profiles[0]}"
    assert _unquote(source["firmware"]) == "efi"
    assert source["RAM_reserve_all"] is True
    assert "pciPassthru.64bitMMIOSizeGB" in source["configuration_parameters"]
    # One vGPU: Packer seals the template; several: the template step does, after the other devices.
    assert _locals(document)["single_vgpu"] == "${length(var.vgpu_profiles) == 1}"
    assert source["create_snapshot"] == "${local.single_vgpu}" and source["snapshot_name"] == "${var.snapshot_name}"
    assert source["convert_to_template"] == "${local.single_vgpu}"
    inline = " ".join(step for p in document["build"][0]["provisioner"] for step in p['"shell"']["inline"])
    assert "nvidia-smi" in inline and "nvidia-container-toolkit" in inline and "nvidia-ctk" in inline
    # The toolkit is pinned, has the CVE-2025-23266 fix, and is recorded where preflight reads it.
    assert (
        toolkit_findings(TemplateFacts("t", extra_config={TOOLKIT_VERSION_KEY: "1.17.7"}), minimum=MINIMUM)[0].level
        == "BLOCKER"
    )
    # configuration_parameters is a merge(...) expression: python-hcl2 keeps it as its text.
    assert f'"{TOOLKIT_VERSION_KEY}" = var.nvidia_container_toolkit_version' in source["configuration_parameters"]
    facts = TemplateFacts("t", extra_config={TOOLKIT_VERSION_KEY: defaults["nvidia_container_toolkit_version"]})
    assert [f.level for f in toolkit_findings(facts, minimum=MINIMUM)] == ["OK"]
    assert "nvidia-container-toolkit-$NVIDIA_CONTAINER_TOOLKIT_VERSION" in inline


def test_the_checklist_is_the_one_the_docs_point_to() -> None:
    bootstrap_doc = (ROOT / "docs" / "bootstrap.md").read_text()
    assert "One template for all nodes" not in bootstrap_doc
    assert "templates/README.md" in bootstrap_doc
    checklist = (TEMPLATES / "README.md").read_text()
    for item in (*GUEST_PACKAGES - {"cri-tools"}, "containerd", "vGPU", "templateSnapshot", "gpuTemplate", "openssl", "tar"):
        assert item in checklist, item


def test_the_template_has_nft_for_the_node_firewall() -> None:
    """Issue 41 item 6: the firewall unit runs /usr/sbin/nft and the bootstrap stops when it fails.
    On EL9 `nft` is the `nftables` package, which a minimal install gets only through firewalld
    (firewalld requires python3-nftables, which requires nftables); the kickstart excludes
    firewalld, so it must name nftables itself, and the Packer build checks it is there."""
    handler = _kickstart()
    assert "/usr/sbin/nft -f" in FIREWALL_UNIT.read_text()
    assert "nftables" in set(handler.packages.packageList), "ks.cfg must install nftables (-firewalld drops it)"
    provisioners = [p for block in _hcl(BASE_HCL)["build"] for p in block["provisioner"]]
    inline = [line for p in provisioners for body in p.values() for line in body.get("inline", [])]
    assert any("/usr/sbin/nft" in line for line in inline), inline


def test_the_kickstart_pins_containerd_to_a_line_the_templates_minor_recommends(dev: Any) -> None:
    """containerd.io unpinned takes whatever Docker's repository has newest, a line the bootstrap may
    then refuse or one no Kubernetes row lists yet; the pin holds the template to the LTS line the
    version policy names, every patch of which containerd's RELEASES.md recommends for the minor."""
    handler = _kickstart()
    pins = [p for p in handler.packages.packageList if p.startswith("containerd.io")]
    assert len(pins) == 1 and re.fullmatch(r"containerd\.io-\d+\.\d+\.\*", pins[0]), (
        f"ks.cfg must pin containerd.io to a line (containerd.io-2.3.*), not {pins}"
    )
    line = pins[0].removeprefix("containerd.io-").removesuffix(".*")
    policy = policy_for(dev.kubernetes.version)
    assert line == policy.containerd_line
    assert containerd_refusal(f"{line}.0", dev.kubernetes.version) is None


def test_a_worker_with_every_gpu_of_its_host_gets_a_template_with_every_vgpu() -> None:
    """Issue 54 item 1: two L40S per host, one worker per host: `vgpu_profiles` takes the list;
    Packer's vsphere-clone adds the first vGPU (it has one `vgpu_profile`), and the post-processor
    runs the template step with every profile, which adds the rest, then snapshots and seals."""
    document = _hcl(GPU_HCL)
    variables = _blocks(document, "variable")
    assert variables["vgpu_profiles"]["type"] == "${list(string)}"
    [post] = [body for block in document["build"] for p in block["post-processor"] for body in p.values()]
    [command] = [_unquote(step) for step in [post["inline"]]]
    # The several-profiles branch runs the step with the build's VM, snapshot and every profile.
    several = command.split(" : ", 1)[1]
    step = "components.vsphere.vgpu.template_step --vm '${var.template_name}' --snapshot '${var.snapshot_name}'"
    assert step in several
    assert "for p in var.vgpu_profiles : " in several and "--profile '${p}'" in several
    assert any("VSPHERE_PASSWORD=${var.vcenter_password}" in e for e in post["environment_vars"])
    # The flags the post-processor passes are the step's own (a typo would fail only on a real build).
    with pytest.raises(SystemExit) as parsed:
        template_step_main(["--help"])
    assert parsed.value.code == 0
    build = gpu_template_build(["nvidia_l40s-48c", "nvidia_l40s-48c"])
    assert (build.packer_profile, build.added_after_packer) == ("nvidia_l40s-48c", ("nvidia_l40s-48c",))
    assert (build.firmware, build.mmio_size_gb) == ("efi", 256)


def test_the_readme_gives_the_mmio_size_of_several_vgpus() -> None:
    """The sizes the checklist lists are the ones the program computes (profiles.py mmio_size_gb)."""
    readme = (TEMPLATES / "README.md").read_text()
    rows = re.findall(r"^\s*\| `(\[[^`]+\])` \| (\d+) \|", readme, re.M)
    assert len(rows) >= 3, "templates/README.md lists the 64-bit MMIO size of several profile lists"
    for profiles, size in rows:
        names = re.findall(r'"([^"]+)"', profiles)
        assert mmio_size_gb(names) == int(size), (profiles, size)


@pytest.mark.parametrize("path", [BASE_HCL, GPU_HCL], ids=lambda p: p.parent.name)
def test_every_validation_message_is_one_packer_accepts(path: Path) -> None:
    """Packer refuses the whole file when a variable's `error_message` is not a sentence: first
    letter uppercase, last character `.`, `?` or `!` (hashicorp/packer hcl2template/
    types.variables.go `looksLikeSentences`). The GPU build's toolkit check said
    "nvidia_container_toolkit_version is a release ...", and `packer build` stopped there."""
    for name, body in _blocks(_hcl(path), "variable").items():
        for validation in body.get("validation", []):
            message = _unquote(validation["error_message"]).strip()
            assert message[:1].isupper() or not message[:1].isalpha(), (name, message)
            assert message[-1:] in ".?!", (name, message)


SHARED_HCL = TEMPLATES / "packer" / "shared" / "vsphere.pkr.hcl"


def test_both_builds_share_one_file_of_vcenter_settings() -> None:
    """One declaration of the plugin, the vCenter variables, the snapshot name and the seal, linked
    into both build folders (Packer reads each folder's *.pkr.hcl, links included); a variable
    declared twice in a folder would stop Packer ("Duplicate variable")."""
    for build in (BASE_HCL, GPU_HCL):
        link = build.parent / "vsphere.pkr.hcl"
        assert link.is_symlink() and link.resolve() == SHARED_HCL.resolve(), link
        names = [name for block in _hcl(build).get("variable", []) for name in map(_unquote, block)]
        assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
        assert len(_hcl(build)["packer"]) == 1
        [source] = _blocks(_hcl(build), "source").values()
        assert source["shutdown_command"] == "${local.seal_command}"
    shared = {_unquote(name) for block in _hcl_file(SHARED_HCL)["variable"] for name in block}
    assert {"vcenter_server", "vcenter_password", "datacenter", "network", "snapshot_name"} <= shared
    assert "cloud-init clean" in _hcl_file(SHARED_HCL)["locals"][0]["seal_command"]
