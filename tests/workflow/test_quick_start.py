"""The README's quick start runs as written (issue 25, item 4): every command of its code blocks
that needs neither vCenter, the Pulumi CLI nor a cluster is executed here, in a shell that has
only sourced `.venv/bin/activate`, exactly as the README spells it; the others are listed in
NOT_RUN with the reason, and that list is checked against the README so it cannot go stale."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

NOT_RUN = {
    "bash scripts/setup.sh": "installs Debian packages (sudo) and PyPI packages; these tests run inside the .venv it made",
    "bash scripts/simulator.sh": "a server that runs until Ctrl-C; tests/stacks/tools/simulator/test_sim_stack.py starts it",
    "VSPHERE_PASSWORD=pass python -m stacks preflight sim": "needs that simulator running; tests/stacks/tools/simulator/test_sim_stack.py runs it",
    "pulumi login file://~": "needs the Pulumi CLI",
    "pulumi stack init dev": "needs the Pulumi CLI and a backend",
    "pulumi preview --stack dev": "needs the Pulumi CLI, a backend and vCenter",
    "bash scripts/up.sh dev": "`pulumi up`: needs the Pulumi CLI, a backend and vCenter",
    "python -m stacks preflight dev": "needs a real vCenter",
    "python -m stacks verify dev": "needs the cluster's MPIJobs (kubectl); the --log lines above run instead",
}


def quick_start() -> list[tuple[str, str]]:
    """(command, comment) for each line of the bash blocks under `## Quick start`."""
    text = README.read_text()
    section = text[text.index("## Quick start") :]
    section = section[: section.index("\n## ", 1)]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.DOTALL):
        for line in block.splitlines():
            command, _, comment = line.partition("  #")
            if command.strip():
                commands.append((command.strip(), comment.strip()))
    return commands


def expected_exit(comment: str) -> int:
    """The exit status the README promises in the line's comment (`exit 1`), else 0."""
    match = re.search(r"\bexit (\d+)", comment)
    return int(match.group(1)) if match else 0


def test_the_quick_start_is_found_and_every_skip_is_in_it() -> None:
    commands = [c for c, _ in quick_start()]
    assert len(commands) >= 15
    assert sorted(set(NOT_RUN) - set(commands)) == []


@pytest.mark.user_stacks  # the README's commands on the user's own stack files: they hold for any valid edit
@pytest.mark.parametrize(("command", "comment"), [c for c in quick_start() if c[0] not in NOT_RUN], ids=lambda v: v)
def test_each_offline_command_runs_as_written(command: str, comment: str) -> None:
    # Only /usr/bin and /bin on PATH: `python` must come from the activated .venv, as for a newcomer.
    result = subprocess.run(
        ["bash", "-c", f"source .venv/bin/activate && {command}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(ROOT / "build"), "LANG": "C.UTF-8"},
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert result.returncode == expected_exit(comment), f"{command}\n{output}"
    for png in re.findall(r"--graph (\S+\.png)", command):
        assert (ROOT / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
