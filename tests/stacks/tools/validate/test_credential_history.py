"""Issue 53 items 6 and 7: `validate` warns of a deploy account a preview could still reach.

- an account once kept in the stack file (an earlier version's advice): its `secure:` ciphertext is
  in git history and opens with the passphrase the previews share;
- ESC environments the stack file imports: every preview opens them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.cli import main as stacks_main
from tests.stack_fixtures import fixture_text
from tests.workflow.scratch_git import git


def _validate(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = stacks_main(["validate", "lab", "--file", str(path)])
    return status, capsys.readouterr().out


@pytest.fixture
def lab_file(tmp_path: Path) -> Path:
    # A site's own stack name; the dev fixture's content renamed to it.
    path = tmp_path / "Pulumi.lab.yaml"
    path.write_text(fixture_text("dev").replace("name: dev\n", "name: lab\n", 1))
    return path


def _with_history(lab_file: Path, once: str) -> None:
    """A git history in which the stack file's `config:` once began with `once`, then lost it."""
    repo, clean = lab_file.parent, lab_file.read_text()
    git(repo, "init", "-q")
    lab_file.write_text(clean.replace("config:\n", f"config:\n{once}", 1))
    git(repo, "add", lab_file.name)
    git(repo, "commit", "-q", "-m", "once")
    lab_file.write_text(clean)
    git(repo, "commit", "-q", "-am", "credentials come by role")


def test_an_account_once_in_the_stack_files_history_is_named(lab_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _with_history(lab_file, "  vsphere:user: administrator@vsphere.local\n  vsphere:password:\n    secure: v1:AAAA\n")
    status, out = _validate(lab_file, capsys)
    assert status == 0, out  # valid today: the warning is about what git still holds
    warnings = [line for line in out.splitlines() if line.startswith("warning: Pulumi.lab.yaml held")]
    assert len(warnings) == 1, out
    assert "`vsphere:password`" in warnings[0]
    assert "Rotate that vCenter account" in out and "change the passphrase" in out


def test_a_clean_history_and_no_git_say_nothing(lab_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = _validate(lab_file, capsys)  # not a git checkout
    assert "held `vsphere" not in out
    git(lab_file.parent, "init", "-q")
    git(lab_file.parent, "add", lab_file.name)
    git(lab_file.parent, "commit", "-q", "-m", "clean from the start")
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


@pytest.mark.parametrize(
    "once",
    [
        "  vsphere:user: administrator@vsphere.local\n",  # an account's name opens nothing
        "  # vsphere:password is a secret: pulumi config set --secret\n",  # earlier shipped files' comment
    ],
    ids=["user-name-only", "comment-naming-the-key"],
)
def test_what_opens_nothing_is_not_named(lab_file: Path, capsys: pytest.CaptureFixture[str], once: str) -> None:
    _with_history(lab_file, once)
    _, out = _validate(lab_file, capsys)
    assert "held `vsphere" not in out
