"""scripts/setup.sh says what it is doing: a fresh clone's setup takes about two minutes, most of
it pip, and a silent terminal for that long reads as a hang (issue 45)."""

from __future__ import annotations

import re
from pathlib import Path

SETUP = Path(__file__).resolve().parents[2] / "scripts" / "setup.sh"
LONG_STEPS = (r"apt-get install", r"pip install [^\n]*-r requirements", r"build-vcsim\.sh")


def _code_lines() -> list[str]:
    return [line.strip() for line in SETUP.read_text().splitlines() if line.strip() and not line.strip().startswith("#")]


def test_every_long_step_is_announced_first() -> None:
    lines = _code_lines()
    for step in LONG_STEPS:
        [index] = [i for i, line in enumerate(lines) if re.search(step, line)]
        before = lines[max(0, index - 4) : index]
        assert any(line.startswith('echo "setup: ') for line in before), f"{step}: nothing printed before it"


def test_the_package_install_shows_its_progress() -> None:
    [install] = [line for line in _code_lines() if re.search(LONG_STEPS[1], line)]
    assert " -q" not in install, install  # pip -q prints nothing until it is done
