"""`validate` warns of a mirror registry reached over TLS with no `mirror.caBundle` (issue 55 item
2): valid, since a public CA may have signed it, but a site registry's certificate seldom is, and
then every node fails its first boot. No warning with the CA, with plainHttp, or without a mirror."""

from __future__ import annotations

import contextlib
import copy
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacks.cli import main
from stacks.environment.loader import ENVIRONMENT_KEY
from tests.stack_fixtures import fixture_view

CA = Path(__file__).parents[3] / "fixtures" / "site-ca.pem"


def _validate(tmp_path: Path, mirror: dict[str, Any] | None) -> tuple[int, list[str]]:
    view = fixture_view("dev")
    values = copy.deepcopy(dict(view.values))
    if mirror is not None:
        values[ENVIRONMENT_KEY]["mirror"] = mirror
    path = tmp_path / "Pulumi.dev.yaml"
    document = {"config": {**values, **{key: {"secure": "AAAA"} for key in view.secret_keys}}}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["validate", "dev", "--file", str(path)])
    return code, [line for line in out.getvalue().splitlines() if line.startswith("warning: mirror.")]


def test_a_registry_over_tls_without_a_ca_bundle_is_warned_of_by_key(tmp_path: Path) -> None:
    code, warnings = _validate(tmp_path, {"registry": "registry.lab.example", "files": "https://files.lab.example/g"})
    assert code == 0
    [line] = warnings
    assert line.startswith(
        "warning: mirror.caBundle: not set, so the nodes trust mirror.registry registry.lab.example and "
        "mirror.files https://files.lab.example/g only through their system CAs"
    )
    assert "Paste that CA's certificate (PEM) into mirror.caBundle, or set mirror.plainHttp: true" in line


@pytest.mark.parametrize(
    "mirror",
    [
        None,
        {"registry": "registry.lab.example", "plainHttp": True},
        {"registry": "registry.lab.example", "caBundle": "CA"},
    ],
    ids=["no mirror", "plainHttp", "caBundle"],
)
def test_no_warning_with_the_ca_with_plain_http_or_without_a_mirror(
    tmp_path: Path, mirror: dict[str, Any] | None
) -> None:
    if mirror is not None and mirror.get("caBundle") == "CA":  # a certificate the model's check parses
        mirror = {**mirror, "caBundle": _a_ca(tmp_path)}
    code, warnings = _validate(tmp_path, mirror)
    assert code == 0
    assert warnings == []


def _a_ca(folder: Path) -> str:
    from tests.stacks.tools.images.site_mirror import make_ca

    ca, _, _ = make_ca(folder)
    return ca.read_text()
