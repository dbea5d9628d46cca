"""`components.vcenter` is vCenter I/O without Pulumi, and preflight's checks are pure: each
checked by importing in a fresh interpreter, where nothing else has loaded the module yet."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import components.vcenter

ROOT = Path(__file__).resolve().parents[3]


def _loaded_after(imports: list[str]) -> set[str]:
    code = "import sys\n" + "".join(f"import {name}\n" for name in imports) + "print('\\n'.join(sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return {line.split(".")[0] for line in result.stdout.splitlines()}


def test_the_vcenter_package_does_not_import_pulumi() -> None:
    modules = [f"components.vcenter.{m.name}" for m in pkgutil.iter_modules(components.vcenter.__path__)]
    assert {"session", "tasks", "lookups", "inventory", "settings", "faults"} <= {m.rsplit(".", 1)[1] for m in modules}

    loaded = _loaded_after(["components.vcenter", *modules])

    assert "pyVmomi" in loaded  # it did import what it talks to vCenter with
    assert "pulumi" not in loaded
    assert "pulumi_vsphere" not in loaded


def test_preflight_checks_and_the_inventory_model_do_not_import_pyvmomi() -> None:
    loaded = _loaded_after(["stacks.tools.preflight.checks", "components.vcenter.inventory_model"])

    assert "stacks" in loaded
    assert "pyVmomi" not in loaded
    assert "pyVim" not in loaded


# `serialize_provider(PvrdmaHostSettingsProvider())` as main made it before the move: its RetryPolicy
# is pickled by reference as `components.vsphere._vsphere.RetryPolicy`. The engine loads the old
# state's provider for delete and refresh, so stacks deployed then must still load it.
OLD_STATE_PROVIDER = (
    "gASV7gAAAAAAAACMHmNvbXBvbmVudHMudnNwaGVyZS5wdnJkbWFfaG9zdJSMGlB2cmRtYUhvc3RTZXR0aW5nc1Byb3ZpZGVylJOUKYGUfZQo"
    "jA1fY29uZmlnX2Vycm9ylE6MBV9jb25ulE6MBXJldHJ5lIwbY29tcG9uZW50cy52c3BoZXJlLl92c3BoZXJllIwLUmV0cnlQb2xpY3mUk5Qp"
    "gZR9lCiMCGF0dGVtcHRzlEsGjApiYXNlX2RlbGF5lEc/4AAAAAAAAIwJbWF4X2RlbGF5lEdAIAAAAAAAAIwJbWF4X3RvdGFslEdAXgAAAAAA"
    "AHVidWIu"
)


def test_a_provider_pickled_before_the_move_still_loads() -> None:
    code = (
        "import base64, sys, dill\n"
        "p = dill.loads(base64.b64decode(sys.stdin.read()))\n"
        "print(type(p).__name__, type(p.retry).__module__, p.retry.max_total, p.retry.login_timeout)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        input=OLD_STATE_PROVIDER,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "PvrdmaHostSettingsProvider",
        "components.vsphere.provider_base",
        "120.0",
        "30.0",
    ]
