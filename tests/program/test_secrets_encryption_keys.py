"""Issue 37 item 4: the Secrets encryption keys as the program deploys them.

Each key name in `kubernetes.secretsEncryptionKeys` is a pulumi-random `RandomBytes` (a secret),
its value only on the control-plane nodes' user-data; a rotation step (a new list of names) rolls
the control plane, whose new VMs get the new EncryptionConfiguration; the default list leaves the
generations stacks recorded before keys existed unchanged.
"""

from __future__ import annotations

from typing import Any

from stacks.tools.plan.mock_runtime import ProgramRun
from tests.program.conftest import edited_view, run_view, stack_view

GATE = "gpucluster:kubernetes:RolloutGate"
BYTES = "random:index/randomBytes:RandomBytes"


def _keys(*names: str) -> Any:
    def edit(env: dict[str, Any]) -> None:
        env.setdefault("kubernetes", {})["secretsEncryptionKeys"] = list(names)

    return edit


def _generations(run: ProgramRun) -> dict[str, str]:
    return {r.name.removeprefix("rollout-gate-"): r.plain_inputs().get("generation") for r in run.by_type(GATE)}


def test_each_key_name_is_a_secret_random_key() -> None:
    run = run_view(edited_view("dev", _keys("key-1", "key-2")), "dev")
    keys = sorted(r.name for r in run.by_type(BYTES))
    assert keys == ["bootstrap-secrets-encryption-key-1", "bootstrap-secrets-encryption-key-2"], keys
    for key in run.by_type(BYTES):
        assert key.plain_inputs()["length"] == 32


def test_a_rotation_step_rolls_the_control_plane_only_and_the_default_rolls_nothing() -> None:
    default = _generations(run_view(stack_view("dev"), "dev"))
    explicit = _generations(run_view(edited_view("dev", _keys("key-1")), "dev"))
    assert explicit == default
    rotated = _generations(run_view(edited_view("dev", _keys("key-1", "key-2")), "dev"))
    control_plane = [name for name in default if not name.startswith("worker")]
    assert control_plane, default
    for name in default:
        changed = rotated[name] != default[name]
        assert changed == (name in control_plane), name
