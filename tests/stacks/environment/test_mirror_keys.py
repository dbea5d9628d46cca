"""`mirror.caBundle` and `mirror.plainHttp` (issue 42): refused by key with the fix, before anything
is registered; a real certificate (made by openssl) is accepted and reaches every node."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from stacks.environment.mirror import Mirror
from tests.real_parts import require_program

REGISTRY = "registry.site.example:5000/gpucluster"


def _certificate(tmp_path: Path) -> str:
    openssl = require_program("openssl", "/usr/bin/openssl", "openssl")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(tmp_path / "ca.key"), "-out", str(tmp_path / "ca.crt"), "-days", "1", "-subj", "/CN=site CA"],
        check=True, capture_output=True,
    )  # fmt: skip
    return (tmp_path / "ca.crt").read_text()


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"registry": REGISTRY, "caBundle": "not a certificate"}, "is not a PEM certificate bundle"),
        (
            {"registry": REGISTRY, "caBundle": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"},
            "is not a readable PEM certificate bundle",
        ),
        ({"plainHttp": True}, "plainHttp is set but there is no registry"),
        ({"caBundle": "x"}, "is not a PEM certificate bundle"),
    ],
)
def test_bad_mirror_keys_are_refused_with_the_fix(keys: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Mirror.model_validate(keys)
    assert message in str(raised.value)


def test_a_ca_bundle_without_a_mirror_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as raised:
        Mirror.model_validate({"caBundle": _certificate(tmp_path)})
    assert "caBundle is set but neither registry nor files is" in str(raised.value)


def test_a_real_certificate_is_accepted(tmp_path: Path) -> None:
    pem = _certificate(tmp_path)
    mirror = Mirror.model_validate({"registry": REGISTRY, "caBundle": pem})
    assert mirror.ca_bundle == pem
