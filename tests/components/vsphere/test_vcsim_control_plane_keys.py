"""Issue 40 item 5, told from vCenter: a three-control-plane dev stack deployed on the simulator
the way pulumi-vsphere makes its VMs (sim_deploy.py, terraform_vm.py: the program's real
user-data in the reconfigure's extraConfig). Every VM's extraConfig as vCenter holds it, and every
reconfigure vCenter recorded in its event log with the spec it applied, hold no private key and no
Secrets encryption key for any VM, the first control-plane node's included (docs/security.md,
"What stays in vCenter").
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from pyVmomi import vim

from stacks.tools.plan.mock_values import fake_outputs
from tests.components.vsphere.conftest import CLUSTER_HOSTS, TEMPLATE_VM, _find
from tests.components.vsphere.sim_deploy import Deployment, deployed, on_the_simulator
from tests.components.vsphere.vm_helpers import clone, destroy, reconfigure, unique, vgpu_device_spec

pytestmark = pytest.mark.vcsim

JOINING = [
    {"name": "master-2", "managementIp": "10.10.0.47"},
    {"name": "master-3", "managementIp": "10.10.0.48"},
]


@pytest.fixture(scope="module")
def deployment(si: Any, vcsim: Any) -> Iterator[Deployment]:
    if not vcsim.extended:
        pytest.skip("needs the vcsim harness")
    base = _find(si, vim.VirtualMachine, TEMPLATE_VM)
    plain, gpu = clone(base, unique("rocky9-k8s")), clone(base, unique("rocky9-k8s-vgpu-t4-16c"))
    reconfigure(gpu, deviceChange=[vgpu_device_spec("grid_t4-16c")])
    simulator = on_the_simulator("dev", template=plain.name, gpu_template=gpu.name, hosts=CLUSTER_HOSTS)

    def edit(env: dict[str, Any]) -> None:
        simulator(env)
        env["controlPlane"]["nodes"] = [*env["controlPlane"]["nodes"], *JOINING]
        env["kubernetes"]["controlPlaneEndpoint"] = "k8s-api.lab.example"

    try:
        with deployed(si, vcsim.config(), "dev", edit) as result:
            assert result.error is None, result.error
            yield result
    finally:
        for template in (plain, gpu):
            with contextlib.suppress(Exception):
                destroy(template)


def _readable(values: list[str]) -> str:
    """The values as stored, and base64-decoded where they decode (guestinfo's encoding)."""
    texts = []
    for value in values:
        texts.append(value)
        with contextlib.suppress(binascii.Error, UnicodeDecodeError):
            texts.append(base64.b64decode(value, validate=True).decode())
    return "\n".join(texts)


def _extra_config_now(vm: Any) -> str:
    return _readable([str(option.value) for option in vm.config.extraConfig or []])


def _reconfigure_events(si: Any, vm: Any) -> str:
    spec = vim.event.EventFilterSpec(entity=vim.event.EventFilterSpec.ByEntity(entity=vm, recursion="self"))
    found = si.RetrieveContent().eventManager.QueryEvents(spec)
    reconfigured = [e for e in found if isinstance(e, vim.event.VmReconfiguredEvent)]
    assert reconfigured, "pulumi-vsphere's reconfigure is in vCenter's event log"
    return _readable([str(o.value) for e in reconfigured for o in (e.configSpec.extraConfig or [])])


def _encryption_keys(deployment: Deployment) -> list[str]:
    names = [r.name for r in deployment.run.by_type("random:index/randomBytes:RandomBytes") if "encryption" in r.name]
    assert names
    return [str(fake_outputs("random:index/randomBytes:RandomBytes", n, {"length": 32})["base64"]) for n in names]


def _control_plane(deployment: Deployment) -> dict[str, Any]:
    vms = {name: vm for name, vm in deployment.vms.items() if name.startswith("control-plane-")}
    assert sorted(vms) == ["control-plane-master", "control-plane-master-2", "control-plane-master-3"]
    return vms


def test_no_control_plane_vm_ever_shows_a_key_in_vcenter(si: Any, deployment: Deployment) -> None:
    """Not even the init VM's: its keys arrive sealed (test_vcsim_init_pki_delivery.py)."""
    keys = _encryption_keys(deployment)
    for name, vm in _control_plane(deployment).items():
        for where, text in (("extraConfig", _extra_config_now(vm)), ("events", _reconfigure_events(si, vm))):
            assert "#cloud-config" in text, (name, where)  # the user-data is there to check
            assert "PRIVATE KEY" not in text, (name, where)
            assert not [k for k in keys if k in text], (name, where)
