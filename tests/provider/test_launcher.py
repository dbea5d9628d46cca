"""Issue 44: on a clone without `.venv`, the engine starting the gpucluster plugin (`pulumi destroy`,
`pulumi refresh`: no program runs, nothing makes the virtualenv) gets one line saying what to run.

The launcher `provider/pulumi-resource-gpucluster` is what the engine runs (its comment cites where
the engine looks for it); the engine reads the plugin's first stdout line as its port and puts any
other line into its error, so the line must be on stdout, alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from stacks import PROJECT_DIR

LAUNCHER = PROJECT_DIR / "provider" / "pulumi-resource-gpucluster"


def _clone(tmp_path: Path) -> Path:
    """A checkout's shape: provider/ with the launcher and a stand-in entry point, no .venv."""
    provider = tmp_path / "clone" / "provider"
    provider.mkdir(parents=True)
    shutil.copy2(LAUNCHER, provider / LAUNCHER.name)
    (provider / "__main__.py").write_text("import sys\nprint('started', *sys.argv[1:])\n")
    return provider.parent


def test_the_launcher_is_executable_and_named_as_the_engine_looks_for_it() -> None:
    assert LAUNCHER.stat().st_mode & 0o111, "the engine runs it directly: it must be executable"
    assert (PROJECT_DIR / "Pulumi.yaml").read_text().count("path: ./provider") == 1


def test_without_the_virtualenv_it_prints_one_line_naming_the_set_up(tmp_path: Path) -> None:
    clone = _clone(tmp_path)

    done = subprocess.run([str(clone / "provider" / LAUNCHER.name), "127.0.0.1:1"], capture_output=True, text=True)

    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    assert "bash scripts/setup.sh" in lines[0] and str(clone / ".venv") in lines[0]


def test_with_the_virtualenv_it_runs_the_plugin_with_the_engines_arguments(tmp_path: Path) -> None:
    clone = _clone(tmp_path)
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "python").symlink_to(sys.executable)

    done = subprocess.run(
        [str(clone / "provider" / LAUNCHER.name), "--tracing", "http://t", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        check=True,
    )

    assert done.stdout.strip() == "started --tracing http://t 127.0.0.1:1"
