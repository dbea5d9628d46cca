"""`verify --availability --ssh-user`: only a POSIX user name reaches ssh (issue 37 item 9). A name
starting with "-" would be read by ssh as an option: `-oProxyCommand=...` runs a local command."""

from __future__ import annotations

import pytest

from stacks.tools.verify.availability.probe import ssh_user_problem


@pytest.mark.parametrize("user", ["root", "rocky", "svc.gpu_ops", "a" * 32, "_admin"])
def test_a_posix_user_name_is_taken(user: str) -> None:
    assert ssh_user_problem(user) is None


@pytest.mark.parametrize("user", ["-oProxyCommand=touch /tmp/pwned", "-x", "a" * 33, "bob smith", "", "eve@host"])
def test_anything_else_is_refused_with_a_reason(user: str) -> None:
    assert ssh_user_problem(user)


def test_ssh_reads_no_option_after_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--` before the destination: whatever the node's address or user, ssh's getopt stops there.
    (The real ssh runs in tests/stacks/tools/availability; this records the command line only.)"""
    import subprocess

    from stacks.tools.verify.availability import probe

    ran: list[list[str]] = []
    monkeypatch.setattr(probe.shutil, "which", lambda _name: "/usr/bin/ssh")
    monkeypatch.setattr(
        probe.subprocess, "run", lambda command, **_: ran.append(command) or subprocess.CompletedProcess(command, 0, "", "")
    )
    probe.ssh_restart_kubelet("rocky", "10.10.0.52")
    [command] = ran
    assert command[command.index("--") + 1] == "rocky@10.10.0.52"
    assert all(not arg.startswith("rocky@") for arg in command[: command.index("--")])
