"""A real sshd run with the benchmark worker's command line, and the keys laid out as the MPI Operator mounts them.

The operator (kubeflow/mpi-operator pkg/controller/mpi_job_controller.go) generates an ECDSA P-521
key (`newSSHAuthSecret`: PEM "EC PRIVATE KEY", public key in authorized_keys form) and mounts the
Secret at `sshAuthMountPath` (`setupSSHOnPod`) with the items `id_rsa`, `id_rsa.pub` and
`authorized_keys`, and `DefaultMode: 0600` when that path is /root/.ssh (else the Secret default,
0644). The kubelet lays a Secret volume out with its atomic writer (kubernetes
pkg/volume/util/atomic_writer.go): the files, with that mode, in a timestamped directory
`..<timestamp>` (0755), a symlink `..data` to it, and each visible name a symlink `<name> ->
..data/<name>`; the mount point itself is the wrapped emptyDir's, made 0777 (pkg/volume/emptydir/
empty_dir.go, `perm`): world-writable, which sshd's `StrictModes yes` refuses.

Here that tree is built in a temporary directory under the user's home, so that sshd's StrictModes
walk (it checks each directory from the key file up to the home) meets nothing but the mount's own
modes. sshd runs on 127.0.0.1 on a free port, as the current user (root here, as in the workers'
images; a non-root sshd can still let its own user in). Without sshd the tests skip, except under
CI=true, where they fail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.real_parts import unavailable

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = Path("/run/sshd")
"""sshd's compiled-in privilege separation directory: it will not start without it (the workers'
command makes it with `mkdir -p /run/sshd`, as Debian's service unit does)."""
SECRET_MODE = 0o600
"""The operator's DefaultMode for /root/.ssh."""


def require_sshd() -> None:
    for tool in (SSHD, shutil.which("ssh"), shutil.which("ssh-keygen")):
        if tool is None or not os.access(tool, os.X_OK):
            unavailable("sshd", "no sshd, ssh or ssh-keygen (apt-get install openssh-server openssh-client)")
    if not PRIVSEP_DIR.is_dir():
        if os.geteuid() != 0:
            unavailable("sshd", f"{PRIVSEP_DIR} is missing and only root can make it")
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)


@dataclass(frozen=True)
class SecretMount:
    """The operator's ssh Secret as the kubelet mounts it."""

    path: Path
    """The mount point (`sshAuthMountPath`)."""

    @property
    def private_key(self) -> Path:
        return self.path / "id_rsa"

    @property
    def authorized_keys(self) -> Path:
        return self.path / "authorized_keys"


def mount_ssh_secret(home: Path, *, mode: int = SECRET_MODE) -> SecretMount:
    """Generate the operator's key pair and lay it out as the kubelet does, at `home/.ssh`."""
    keys = home / "keygen"
    keys.mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-C", "", "-f", str(keys / "id")],
        check=True,
    )
    assert (keys / "id").read_text().startswith("-----BEGIN EC PRIVATE KEY-----")  # what the operator writes
    items = {
        "id_rsa": (keys / "id").read_bytes(),
        "id_rsa.pub": (keys / "id.pub").read_bytes(),
        "authorized_keys": (keys / "id.pub").read_bytes(),
    }
    mount = home / ".ssh"
    mount.mkdir()
    timestamped = mount / "..2026_01_01_00_00_00.000000001"
    timestamped.mkdir()
    os.chmod(timestamped, 0o755)
    for name, data in items.items():
        (timestamped / name).write_bytes(data)
        os.chmod(timestamped / name, mode)
        (mount / name).symlink_to(f"..data/{name}")
    (mount / "..data").symlink_to(timestamped.name)
    os.chmod(mount, 0o777)
    return SecretMount(mount)


@contextlib.contextmanager
def home_folder() -> Iterator[Path]:
    """A temporary directory right under the user's home (see the module docstring for why)."""
    folder = Path(tempfile.mkdtemp(prefix=".gpucluster-sshd-test-", dir=Path.home()))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RunningSshd:
    port: int
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def run_sshd(worker_words: list[str], secret: SecretMount, folder: Path) -> Iterator[RunningSshd]:
    """The worker's sshd command line, with only what a test machine needs added or changed: its own
    port, host key and empty config file (`-f`: the image's sshd_config is not this machine's), a
    loopback listener, no pid file, and the authorized_keys path under the temporary home."""
    assert worker_words[0] == SSHD, worker_words
    words = list(worker_words)
    port = free_port()
    words[words.index("-p") + 1] = str(port)
    host_key = folder / "ssh_host_ed25519_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
    config = folder / "sshd_config"
    config.write_text("")
    log = folder / "sshd.log"
    extra = [
        "-f", str(config), "-h", str(host_key),
        "-o", "ListenAddress=127.0.0.1",
        "-o", "PidFile=none",
        "-o", f"AuthorizedKeysFile={secret.authorized_keys}",
    ]  # fmt: skip
    with open(log, "wb") as out:
        process = subprocess.Popen([*words, *extra], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"sshd exited {process.returncode}: {log.read_text(errors='replace')}")
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd did not listen on {port}: {log.read_text(errors='replace')}")
            time.sleep(0.05)
        yield RunningSshd(port, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def ssh_login(client_options: list[str], port: int, key: Path) -> subprocess.CompletedProcess[str]:
    """A real `ssh` login with the launcher's options (its port replaced) and the mounted key."""
    options = list(client_options)
    options[options.index("-p") + 1] = str(port)
    return subprocess.run(
        [
            "ssh", "-F", "/dev/null", *options,
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=5",
            "-i", str(key), "127.0.0.1", "echo", "logged-in-as-$(id -u)",
        ],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
