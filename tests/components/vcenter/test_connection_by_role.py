"""Issue 40, item 1: the vCenter account comes from the run's role (its environment), never from the
stack file over it.

pulumi-vsphere takes `vsphere:*` stack config first and the VSPHERE_* variables only when a key is
unset (pulumi/pulumi-vsphere provider/resources.go maps no env default for user/password/server, so
the Terraform schema's `DefaultFunc: schema.EnvDefaultFunc("VSPHERE_USER", nil)` of
hashicorp/terraform-provider-vsphere vsphere/provider.go applies, which runs only for an unset key).
Our providers must never pick a different account or server than that, and never the stack file's
over the environment's: where both name a value and they differ, the run stops and says which key.
"""

from __future__ import annotations

import pytest

from components.vcenter.errors import VsphereError
from components.vcenter.settings import VcenterConnection

PREVIEW_ENV = {  # what preview-<stack> hands the pulumi step: the read-only account
    "VSPHERE_SERVER": "vcenter.lab.example.com",
    "VSPHERE_USER": "svc-pulumi-dev-readonly@vsphere.local",
    "VSPHERE_PASSWORD": "read-only-secret",
}


def test_a_preview_logs_in_with_its_environments_account() -> None:
    conn = VcenterConnection.from_pulumi_config({"vsphere:vsphereServer": "vcenter.lab.example.com"}, env=PREVIEW_ENV)
    assert (conn.server, conn.user, conn.password) == (
        "vcenter.lab.example.com",
        "svc-pulumi-dev-readonly@vsphere.local",
        "read-only-secret",
    )


@pytest.mark.parametrize(
    ("key", "value", "variable"),
    [
        ("vsphere:user", "administrator@vsphere.local", "VSPHERE_USER"),
        ("vsphere:password", "deploy-secret", "VSPHERE_PASSWORD"),
        ("vsphere:vsphereServer", "vcenter-prod.corp.example.com", "VSPHERE_SERVER"),
    ],
)
def test_the_stack_config_never_wins_over_the_environment(key: str, value: str, variable: str) -> None:
    config = {"vsphere:vsphereServer": "vcenter.lab.example.com", key: value}
    with pytest.raises(VsphereError) as refused:
        VcenterConnection.from_pulumi_config(config, env=PREVIEW_ENV)
    message = str(refused.value)
    assert key in message and variable in message, message
    assert "deploy-secret" not in message and "read-only-secret" not in message  # never a password


def test_the_same_value_in_both_places_is_no_conflict() -> None:
    conn = VcenterConnection.from_pulumi_config(
        {"vsphere:vsphereServer": "vcenter.lab.example.com", "vsphere:allowUnverifiedSsl": "true"},
        env={**PREVIEW_ENV, "VSPHERE_ALLOW_UNVERIFIED_SSL": "1"},
    )
    assert conn.verify_ssl is False
