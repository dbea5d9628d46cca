"""The systemd unit that drives the bootstrap: it must start on every boot until the script has
succeeded, and never stop retrying (systemd.service(5) Restart=, systemd.unit(5)
StartLimitIntervalSec=)."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from components.k8s.node_bootstrap import host_files, paths
from components.k8s.node_bootstrap.user_data import render_bootstrap_unit


def unit() -> configparser.ConfigParser:
    parsed = configparser.ConfigParser(strict=False, interpolation=None)
    parsed.optionxform = str  # type: ignore[assignment,method-assign]
    parsed.read_string(render_bootstrap_unit())
    return parsed


def test_the_unit_restarts_a_failed_bootstrap_forever() -> None:
    parsed = unit()
    assert parsed["Service"]["Restart"] == "on-failure"
    assert int(parsed["Service"]["RestartSec"]) >= 10
    # Restarts count against the start limit (5 in 10 s by default) unless it is disabled.
    assert parsed["Unit"]["StartLimitIntervalSec"] == "0"
    # A oneshot unit waiting for its API server would hold multi-user.target for as long.
    assert parsed["Service"]["Type"] == "simple"


def test_the_unit_runs_the_script_with_the_nodes_settings_until_done() -> None:
    parsed = unit()
    assert parsed["Service"]["ExecStart"] == paths.BOOTSTRAP_SCRIPT_PATH
    assert parsed["Service"]["EnvironmentFile"] == paths.BOOTSTRAP_ENV_PATH
    assert parsed["Unit"]["ConditionPathExists"] == "!" + paths.BOOTSTRAP_DONE_MARKER
    assert "network-online.target" in parsed["Unit"]["After"]


def test_multi_user_target_wants_the_unit_through_a_plain_file() -> None:
    drop_in = configparser.ConfigParser(strict=False, interpolation=None)
    drop_in.optionxform = str  # type: ignore[assignment,method-assign]
    drop_in.read_string(host_files.host_file(host_files.BOOTSTRAP_WANTS_DROP_IN))
    assert drop_in["Unit"]["Wants"] == paths.BOOTSTRAP_UNIT_NAME
    assert paths.BOOTSTRAP_WANTS_DROP_IN_PATH.startswith("/etc/systemd/system/multi-user.target.d/")


def test_the_script_spells_the_paths_the_renderer_writes() -> None:
    script = host_files.host_file(host_files.BOOTSTRAP_SCRIPT)
    for path in (paths.KUBEADM_CONFIG_PATH, paths.CALICO_INSTALLATION_PATH, paths.PKI_DIR, paths.PKI_STAGING_DIR,
                 paths.BOOTSTRAP_DONE_MARKER, paths.SYSCTL_PATH):  # fmt: skip
        name = path.rpartition("/")[2]
        assert name in script, path
    assert "/etc/containerd/config.toml" in script


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_parses_the_unit_without_a_warning(tmp_path: Path) -> None:
    script = tmp_path / paths.BOOTSTRAP_SCRIPT_PATH.lstrip("/")
    script.parent.mkdir(parents=True)
    script.write_text(host_files.host_file(host_files.BOOTSTRAP_SCRIPT))
    script.chmod(0o700)
    unit_path = tmp_path / paths.BOOTSTRAP_UNIT_PATH.lstrip("/")
    unit_path.parent.mkdir(parents=True)
    unit_path.write_text(render_bootstrap_unit())
    result = subprocess.run(
        ["systemd-analyze", "verify", f"--root={tmp_path}", paths.BOOTSTRAP_UNIT_PATH],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Without a whole OS under --root, verify reports missing targets; what matters are the
    # complaints about our file itself ("<path>:<line>: ..."), e.g. an unknown or misspelt key.
    complaints = [line for line in result.stderr.splitlines() if re.search(r"gpucluster-bootstrap\.service:\d+:", line)]
    assert complaints == []
