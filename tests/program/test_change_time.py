"""`plan --against`: how long the rolling change itself takes, and what a change does not do.

The fresh-deployment estimate says how long a new stack takes; a change to a running one takes
nodes x (drain, delete, clone, boot, join, settle), one chain after another as the rolling-update
gates order them. Planned with the real program under the mock runtime, then timed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from stacks.tools.plan.deploy_time.change import change_time
from stacks.tools.plan.deploy_time.durations import Durations
from stacks.tools.plan.diff import diff_plans
from tests.program.conftest import ROOT, edited_view, run_view, stack_view
from tests.stack_fixtures import fixture_stack

D = Durations()
REPLACE_AND_SETTLE_LINKED = (
    D.drain + D.vm_destroy + D.linked_clone + D.power_on + D.guest_boot + D.kubeadm_join + D.node_settle
)


def test_new_templates_on_staging_take_every_node_one_after_another() -> None:
    """Staging, both templates rebuilt: 3 control-plane nodes and 8 workers, one chain (maxUnavailable 1): eleven times
    one node's drain, delete, linked clone, power-on, boot, join and settle, about 52 minutes,
    where the fresh deployment's estimate is about 5."""
    before = run_view(stack_view("staging"), "staging")
    rebuilt = {"template": "rocky9-k8s-template-v2", "gpuTemplate": "rocky9-k8s-vgpu-a100-40c-v2"}
    after = run_view(edited_view("staging", lambda env: env["vcenter"].update(rebuilt)), "staging")
    timed = change_time(diff_plans(before.resources, after.resources), after.resources, D)
    [chain] = timed.chains
    assert chain[:4] == ["control-plane-cp-1", "control-plane-cp-2", "control-plane-cp-3", "gpu-workers-worker-1"]
    assert len(chain) == 11
    assert timed.seconds == 11 * REPLACE_AND_SETTLE_LINKED
    first = timed.lines()[0]
    assert first.startswith("rolling change: about 52 minutes, this change's own time (not the fresh deployment's): ")
    assert "11 node(s) replaced one after another" in first
    assert "each 4m45s: drain 1m00s, delete 0m15s, linked clone 0m20s, power-on 0m10s, boot 1m00s, " in first


def test_a_template_snapshot_change_on_dev_changes_no_node_and_says_what_it_does_not_do(tmp_path: Path) -> None:
    document = yaml.safe_load((fixture_stack("dev")).read_text())
    document["config"]["vsphere-gpu-cluster:environment"]["vcenter"]["templateSnapshot"] = "base-v2"
    (tmp_path / "deployed").mkdir()
    old = tmp_path / "deployed" / "Pulumi.dev.yaml"
    old.write_text((fixture_stack("dev")).read_text())
    new = tmp_path / "Pulumi.dev.after.yaml"
    new.write_text(yaml.safe_dump(document, sort_keys=False))
    result = subprocess.run(
        [sys.executable, "-m", "stacks", "plan", "dev", "--file", new, "--out", tmp_path / "out", "--against", old],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    against = result.stdout[result.stdout.index(f"against {old}:") :]
    assert "  rolling change: none: no node is replaced, rebooted, power-cycled, added or removed" in against
    note = next(line for line in against.splitlines() if "vcenter.templateSnapshot" in line)
    assert "'base' -> 'base-v2'" in note
    assert "replaces no node and changes nothing on existing ones" in note
    assert "the template's current snapshot" in note  # what the provider clones from
