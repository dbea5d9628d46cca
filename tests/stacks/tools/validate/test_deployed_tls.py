"""Issue 53 item 8: a stack the workflow deploys verifies vCenter's certificate.

`vsphere:allowUnverifiedSsl: true` in a stack listed in `.github/deploy-order` is refused: its
deployment would hand the write account's password to anyone answering for vCenter. Stacks only
previewed or tried by hand keep the choice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.cli import main as stacks_main
from tests.stack_fixtures import fixture_text

KEY = "vsphere:allowUnverifiedSsl"


def _project(tmp_path: Path, *, tls: str, order: str | None) -> Path:
    text = fixture_text("dev").replace("name: dev\n", "name: lab\n", 1)
    lines = [line for line in text.splitlines(keepends=True) if KEY not in line]
    text = "".join(lines).replace("config:\n", f"config:\n  {KEY}: {tls}\n", 1)
    (tmp_path / "Pulumi.lab.yaml").write_text(text)
    if order is not None:
        (tmp_path / ".github").mkdir()
        (tmp_path / ".github" / "deploy-order").write_text(order)
    return tmp_path / "Pulumi.lab.yaml"


def _validate(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = stacks_main(["validate", "lab", "--file", str(path)])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_a_deployed_stack_may_not_skip_vcenters_certificate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out = _validate(_project(tmp_path, tls='"true"', order="lab\n"), capsys)
    assert status != 0
    assert f"{KEY}: true, but lab is deployed by the workflow" in out
    assert "SSL_CERT_FILE" in out


@pytest.mark.parametrize(("tls", "order"), [('"true"', None), ('"true"', "other\n"), ('"false"', "lab\n")])
def test_a_stack_tried_by_hand_or_verifying_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tls: str, order: str | None
) -> None:
    if order == "other\n":
        (tmp_path / "Pulumi.other.yaml").write_text(
            fixture_text("staging").replace("name: staging\n", "name: other\n", 1)
        )
    status, out = _validate(_project(tmp_path, tls=tls, order=order), capsys)
    assert status == 0, out
