"""cloud-init keeps copies of the user-data it ran (the join token; on control-plane nodes the CA
keys) on the node: the bootstrap removes them once the node is bootstrapped (issue 37 item 2).

The copies are laid out by the real cloud-init's own code (Debian's cloud-init 22.4, run with
/usr/bin/python3, which has its `cloudinit` package): `helpers.Paths` places them, `util.write_file`
writes the raw and processed user-data (what `stages.Init.update` writes) and the merged
cloud-config (handlers/cloud_config.py), and `sources.pkl_store` pickles the datasource with the
user-data in it (obj.pkl). Newer cloud-init also writes the merged configuration to
/run/cloud-init/combined-cloud-config.json (`cloud-init query combined_cloud_config`), added here
by hand. Without cloud-init the tests skip, except under CI=true, where they fail.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.components.k8s.node_bootstrap.cluster_settings import CONTROL_PLANE_JOIN
from tests.components.k8s.node_bootstrap.node_harness import Node
from tests.components.k8s.node_bootstrap.test_bootstrap_script_runs import PKI, TOKEN, make_node
from tests.real_parts import unavailable

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the bootstrap script needs bash")

SYSTEM_PYTHON = "/usr/bin/python3"
INSTANCE_ID = "dev-gpu-node"

_LAY_OUT = r"""
import os, sys
from cloudinit import helpers, sources, util
from cloudinit.sources.DataSourceNone import DataSourceNone


class Datasource(DataSourceNone):
    # Only where cloud-init keeps what a datasource read matters here, and its instance id.
    def get_instance_id(self):
        return self.metadata["instance-id"]


root, iid = sys.argv[1], sys.argv[2]
user_data = sys.stdin.buffer.read()
paths = helpers.Paths({"cloud_dir": root + "/var/lib/cloud", "run_dir": root + "/run/cloud-init"})
ds = Datasource(sys_cfg={}, distro=None, paths=paths)
ds.metadata = {"instance-id": iid}
ds.userdata_raw = user_data
paths.datasource = ds
util.write_file(paths.get_ipath("userdata_raw"), user_data, 0o600)
util.write_file(paths.get_ipath("userdata"), str(ds.get_userdata()), 0o600)
util.write_file(paths.get_ipath("cloud_config"), user_data, 0o600)
util.write_file(os.path.join(paths.get_ipath("sem"), "config_write_files.once-per-instance"), "", 0o644)
os.symlink(paths.get_ipath(), paths.instance_link)
sources.pkl_store(ds, paths.get_ipath_cur("obj_pkl"))
print(paths.get_ipath())
"""


def cloud_init_ran(node: Node) -> Path:
    """What cloud-init leaves on the node after the first boot's user-data; its instance directory."""
    if not Path(SYSTEM_PYTHON).exists():
        unavailable("cloud-init", f"no {SYSTEM_PYTHON}")
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import cloudinit"], capture_output=True, check=False)
    if probe.returncode != 0:
        unavailable(
            "cloud-init", "its Python package is not installed (apt-get install cloud-init; scripts/setup.sh does)"
        )
    result = subprocess.run(
        [SYSTEM_PYTHON, "-c", _LAY_OUT, str(node.root), INSTANCE_ID],
        input=node.user_data.encode(),
        capture_output=True,
        check=True,
    )
    combined = node.file("/run/cloud-init/combined-cloud-config.json")
    combined.parent.mkdir(parents=True, exist_ok=True)
    combined.write_text(json.dumps(yaml.safe_load(node.user_data)))
    combined.chmod(0o600)
    return Path(result.stdout.decode().strip())


def holding_secrets(root: Path) -> list[str]:
    """Files under cloud-init's directories that hold the join token or a key."""
    needles = [TOKEN.encode(), CONTROL_PLANE_JOIN.token.encode(), PKI.ca_key_pem.splitlines()[1].encode()]
    found = []
    for top in (root / "var/lib/cloud", root / "run/cloud-init"):
        for path in top.rglob("*"):
            if path.is_file() and not path.is_symlink() and any(n in path.read_bytes() for n in needles):
                found.append(str(path.relative_to(root)))
    return sorted(found)


@pytest.mark.parametrize("name", ["cp-1", "cp-2", "gpu-1"])
def test_cloud_inits_copies_of_the_user_data_are_gone_once_bootstrapped(tmp_path: Path, name: str) -> None:
    node = make_node(tmp_path, name)
    instance = cloud_init_ran(node)
    assert holding_secrets(node.root), "the copies were not laid out: the test would prove nothing"

    assert node.boot().returncode == 0

    assert node.done
    assert holding_secrets(node.root) == []
    # cloud-init's record that this instance ran its per-instance modules stays: a later boot must
    # not run write_files or runcmd again.
    assert (instance / "sem" / "config_write_files.once-per-instance").exists()
    assert node.file("/var/lib/cloud/instance").resolve() == instance.resolve()


def test_a_boot_cut_at_its_last_step_removes_them_on_the_next_boot(tmp_path: Path) -> None:
    reference = make_node(tmp_path / "reference", "gpu-1")
    assert reference.boot().returncode == 0
    node = make_node(tmp_path / "cut", "gpu-1")
    cloud_init_ran(node)
    node.cut_power_at(len(reference.calls), "after")  # the join done, nothing after it
    assert node.boot().power_cut
    node.restore_power()

    assert node.boot().returncode == 0
    assert node.done
    assert holding_secrets(node.root) == []
