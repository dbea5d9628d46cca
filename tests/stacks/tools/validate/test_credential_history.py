"""Issue 53 items 6 and 7: `validate` warns of a deploy account a preview could still reach.

- an account once kept in the stack file (an earlier version's advice): its `secure:` ciphertext is
  in git history and opens with the passphrase the previews share;
- ESC environments the stack file imports: every preview opens them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from stacks.cli import main as stacks_main
from tests.stack_fixtures import fixture_text


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo, check=True, capture_output=True
    )


def _validate(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = stacks_main(["validate", "lab", "--file", str(path)])
    return status, capsys.readouterr().out


@pytest.fixture
def lab_file(tmp_path: Path) -> Path:
    # A site's own stack name; the dev fixture's content renamed to it.
    path = tmp_path / "Pulumi.lab.yaml"
    path.write_text(fixture_text("dev").replace("name: dev\n", "name: lab\n", 1))
    return path


def test_an_account_once_in_the_stack_files_history_is_named(lab_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = lab_file.parent
    clean = lab_file.read_text()
    _git(repo, "init", "-q")
    held = clean.replace("config:\n", "config:\n  vsphere:user: administrator@vsphere.local\n  vsphere:password:\n    secure: v1:AAAA\n", 1)
    lab_file.write_text(held)
    _git(repo, "add", lab_file.name)
    _git(repo, "commit", "-q", "-m", "as the old docs said")
    lab_file.write_text(clean)
    _git(repo, "commit", "-q", "-am", "credentials come by role")
    status, out = _validate(lab_file, capsys)
    assert status == 0, out  # valid today: the warning is about what git still holds
    warnings = [line for line in out.splitlines() if line.startswith("warning: Pulumi.lab.yaml held")]
    assert len(warnings) == 1, out
    assert "`vsphere:password`" in warnings[0]
    assert "Rotate that vCenter account" in out and "change the passphrase" in out


def test_a_clean_history_and_no_git_say_nothing(lab_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = _validate(lab_file, capsys)  # not a git checkout
    assert "held `vsphere" not in out
    _git(lab_file.parent, "init", "-q")
    _git(lab_file.parent, "add", lab_file.name)
    _git(lab_file.parent, "commit", "-q", "-m", "clean from the start")
    _, out = _validate(lab_file, capsys)
    assert "held `vsphere" not in out and "ESC" not in out


def test_an_imported_esc_environment_is_named_as_open_to_previews(
    lab_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lab_file.write_text("environment:\n  - vsphere-gpu-cluster/lab\n" + lab_file.read_text())
    status, out = _validate(lab_file, capsys)
    assert status == 0, out
    assert "imports the ESC environment(s) vsphere-gpu-cluster/lab" in out
    assert "esc run ENV -- pulumi up" in out


def test_an_account_name_alone_in_history_opens_nothing(lab_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = lab_file.parent
    clean = lab_file.read_text()
    _git(repo, "init", "-q")
    lab_file.write_text(clean.replace("config:\n", "config:\n  vsphere:user: administrator@vsphere.local\n", 1))
    _git(repo, "add", lab_file.name)
    _git(repo, "commit", "-q", "-m", "the account's name, no password")
    lab_file.write_text(clean)
    _git(repo, "commit", "-q", "-am", "credentials come by role")
    _, out = _validate(lab_file, capsys)
    assert "held `vsphere" not in out


def test_a_comment_naming_the_key_is_no_account(lab_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Earlier shipped stack files only said `# vsphere:password is a secret: ...` in a comment."""
    repo = lab_file.parent
    clean = lab_file.read_text()
    _git(repo, "init", "-q")
    lab_file.write_text(clean.replace("config:\n", "config:\n  # vsphere:password is a secret: pulumi config set --secret\n", 1))
    _git(repo, "add", lab_file.name)
    _git(repo, "commit", "-q", "-m", "a comment")
    lab_file.write_text(clean)
    _git(repo, "commit", "-q", "-am", "gone")
    _, out = _validate(lab_file, capsys)
    assert "held `vsphere" not in out
