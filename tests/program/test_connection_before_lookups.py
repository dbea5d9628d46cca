"""Issue 53 item 8: the vCenter server and TLS setting are checked in the program, before any lookup.

pulumi-vsphere takes a `vsphere:*` key from the stack config over its VSPHERE_* variable (it reads
the variable only for an unset key: terraform-provider-vsphere vsphere/provider.go,
`schema.EnvDefaultFunc`), and its lookups (`get_datacenter`, `get_host`, ...) run while the program
registers resources, before our plugin's `configure` could refuse the disagreement. So the program
itself stops first, naming the key and the variable, and nothing is looked up or registered.
"""

from __future__ import annotations

import pytest
from pulumi.runtime import mocks

from tests.program.conftest import run_view, stack_view


@pytest.mark.parametrize(
    ("variable", "value", "key"),
    [
        ("VSPHERE_SERVER", "vcenter-prod.corp.example.com", "vsphere:vsphereServer"),
        ("VSPHERE_ALLOW_UNVERIFIED_SSL", "false", "vsphere:allowUnverifiedSsl"),
    ],
)
def test_a_disagreeing_environment_stops_the_program_before_any_lookup(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, key: str
) -> None:
    view = stack_view("dev")  # the fixture dev names vcenter.lab.example.com and allowUnverifiedSsl true
    looked_up: list[str] = []
    original_call = mocks.MockMonitor.Invoke

    def recording_invoke(self: mocks.MockMonitor, request: object) -> object:
        looked_up.append(str(getattr(request, "tok", "")))
        return original_call(self, request)

    monkeypatch.setattr(mocks.MockMonitor, "Invoke", recording_invoke)
    monkeypatch.setenv(variable, value)
    with pytest.raises(Exception, match=rf"{key} \(stack config\) differs from env {variable}") as stopped:
        run_view(view, "dev")
    assert "pulumi config rm" in str(stopped.value)
    assert looked_up == [], looked_up


def test_the_same_settings_in_both_places_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VSPHERE_SERVER", "vcenter.lab.example.com")
    monkeypatch.setenv("VSPHERE_ALLOW_UNVERIFIED_SSL", "1")
    run = run_view(stack_view("dev"), "dev")
    assert run.by_type("vsphere:index/folder:Folder")
