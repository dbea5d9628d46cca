"""The version policy as data (components.k8s.version_policy, components.k8s.kubeadm_pins): one entry
per supported minor, each etcd tag clear of the next line's floor, each Calico pinned and tested on
its minor, and `validate` warning on a minor past its end of life on a clock the test sets."""

from __future__ import annotations

import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from components.k8s.etcd.versions import UPGRADE_FLOORS, etcd_line, parse_etcd_version
from components.k8s.facts import CALICO_TESTED_KUBERNETES, SUPPORTED_KUBERNETES_MINORS
from components.k8s.kubeadm_pins import KUBEADM_PINS, KubeadmPins, kubeadm_pins
from components.k8s.vendored import CALICO_OPERATOR, pinned_releases
from components.k8s.version_policy import (
    NEWEST_MINOR,
    NEWEST_PINNED_CALICO,
    POLICY,
    TODAY_VARIABLE,
    end_of_life_warning,
    policy_for,
    today,
)
from tests.stack_fixtures import fixture_project_dir, fixture_stack

REPO = Path(__file__).resolve().parents[3]


def test_every_supported_minor_has_its_policy_and_kubeadms_pins() -> None:
    assert set(POLICY) == set(SUPPORTED_KUBERNETES_MINORS) == set(KUBEADM_PINS)
    assert NEWEST_MINOR == 37 and max(SUPPORTED_KUBERNETES_MINORS) == 37 and 36 in SUPPORTED_KUBERNETES_MINORS
    for minor in SUPPORTED_KUBERNETES_MINORS:
        pins = kubeadm_pins(minor)
        assert isinstance(pins, KubeadmPins)
        parse_etcd_version(pins.etcd)  # kubeadm's spelling: 3.6.5-0
        assert pins.coredns.startswith("v1.") and not pins.pause.startswith("v")


def test_kubeadm_moves_etcd_to_3_6_at_1_34_and_to_3_7_at_1_37() -> None:
    assert [etcd_line(kubeadm_pins(m).etcd) for m in SUPPORTED_KUBERNETES_MINORS] == [
        (3, 5), (3, 5), (3, 6), (3, 6), (3, 6), (3, 7)
    ]  # fmt: skip
    with pytest.raises(ValueError, match=r"1\.32-1\.37"):
        kubeadm_pins(38)


def test_the_stacks_etcd_is_never_older_than_kubeadms_and_on_the_same_line() -> None:
    for minor, policy in POLICY.items():
        ours, kubeadms = parse_etcd_version(policy.etcd), parse_etcd_version(kubeadm_pins(minor).etcd)
        assert ours >= kubeadms and ours[:2] == kubeadms[:2], minor


def test_each_minor_runs_an_etcd_the_next_minors_line_accepts() -> None:
    """Without it the upgrade out of a minor would be refused by a gate the stack cannot pass itself."""
    for minor in SUPPORTED_KUBERNETES_MINORS:
        if minor + 1 not in POLICY:
            continue
        here, there = etcd_line(POLICY[minor].etcd), etcd_line(POLICY[minor + 1].etcd)
        if there > here:
            assert parse_etcd_version(POLICY[minor].etcd) >= UPGRADE_FLOORS[there], (minor, there)


def test_each_minors_calico_is_pinned_and_tested_on_it() -> None:
    pinned = set(pinned_releases(CALICO_OPERATOR))
    assert NEWEST_PINNED_CALICO in pinned
    for minor, policy in POLICY.items():
        if policy.calico is None:
            # Nothing pinned is tested on it: the newest pinned one is not either.
            assert minor not in CALICO_TESTED_KUBERNETES[int(NEWEST_PINNED_CALICO.split(".")[1])]
            continue
        assert policy.calico in pinned, minor
        assert minor in CALICO_TESTED_KUBERNETES[int(policy.calico.split(".")[1])], minor


def test_end_of_life_dates_follow_each_other_and_warn_after_the_day() -> None:
    dates = [POLICY[m].end_of_life for m in SUPPORTED_KUBERNETES_MINORS]
    assert dates == sorted(dates)
    assert end_of_life_warning("1.34.2", date(2026, 10, 27)) is None
    warning = end_of_life_warning("1.34.2", date(2026, 11, 27))
    assert warning is not None and "end of life on 2026-10-27" in warning and "towards 1.37" in warning
    assert end_of_life_warning("1.36.1", date(2026, 11, 27)) is None
    assert end_of_life_warning("1.37.1", date(2026, 11, 27)) is None


def test_the_clock_is_the_variable_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TODAY_VARIABLE, "2027-03-01")
    assert today() == date(2027, 3, 1)
    assert end_of_life_warning("1.35.0") is not None  # 1.35: 2027-02-28
    monkeypatch.setenv(TODAY_VARIABLE, "soon")
    with pytest.raises(ValueError, match=TODAY_VARIABLE):
        today()


def test_an_unsupported_minor_is_refused_naming_the_newest() -> None:
    with pytest.raises(ValueError, match=r"the newest is 1\.37"):
        policy_for("1.38.0")


def _validate(tmp_path: Path, version: str, day: str) -> subprocess.CompletedProcess[str]:
    stack = tmp_path / "Pulumi.dev.yaml"
    text = fixture_stack("dev").read_text()
    (marker,) = [line for line in text.splitlines() if line.strip().startswith("version: 1.")]
    stack.write_text(text.replace(marker, marker.split("version:")[0] + f"version: {version}"))
    return subprocess.run(
        [sys.executable, "-m", "stacks", "validate", "dev", "--file", str(stack)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", TODAY_VARIABLE: day},
        timeout=120,
    )


def test_validate_accepts_1_37_and_1_36_and_warns_past_end_of_life(tmp_path: Path) -> None:
    for version in ("1.37.1", "1.36.0"):
        result = _validate(tmp_path, version, "2026-11-27")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "end of life" not in result.stdout
    result = _validate(tmp_path, "1.37.1", "2026-11-27")
    assert "warning: kubernetes.version 1.37.1: no Calico release this program pins is tested" in result.stdout
    result = _validate(tmp_path, "1.34.2", "2026-11-27")
    assert result.returncode == 0
    assert "warning: kubernetes.version 1.34.2: Kubernetes 1.34 reached its end of life on 2026-10-27" in result.stdout
    assert "end of life" not in _validate(tmp_path, "1.34.2", "2026-10-01").stdout


def test_validate_refuses_a_minor_the_bootstrap_does_not_support_naming_the_newest(tmp_path: Path) -> None:
    result = _validate(tmp_path, "1.38.0", "2026-11-27")
    assert result.returncode != 0
    assert "kubernetes.version: Kubernetes 1.38 is not supported by the bootstrap" in result.stderr
    assert "the newest is 1.37" in result.stderr


def test_stacks_images_lists_the_etcd_the_stack_runs(tmp_path: Path) -> None:
    """`python -m stacks images` names registry.k8s.io/etcd at the stack's own tag (kubeadm pulls it
    for etcd.local.imageTag), at the mirror's place when the stack has one."""
    from stacks.environment.loader import load_environment
    from stacks.environment.stack_file import read_stack_file
    from stacks.tools.images.inventory import outside_plan_images

    view = read_stack_file(fixture_stack("dev"))
    env = load_environment(view)
    assert ("registry.k8s.io/etcd:3.6.13-0", "kubeadm: etcd.local.imageTag") in outside_plan_images(env)
    at_1_37 = env.model_copy(update={"kubernetes": env.kubernetes.model_copy(update={"version": "1.37.1"})})
    assert ("registry.k8s.io/etcd:3.7.0-0", "kubeadm: etcd.local.imageTag") in outside_plan_images(at_1_37)
    result = subprocess.run(
        [sys.executable, "-m", "stacks", "images", "dev"],
        capture_output=True, text=True, cwd=fixture_project_dir(), timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "registry.k8s.io/etcd:3.6.13-0" in result.stdout


def test_kubeadm_pins_etcd_3_6_10_for_1_34_to_1_36() -> None:
    """kubernetes/kubernetes#138392: "kubeadm: updated the supported etcd version to v3.6.10 for
    supported control plane versions v1.34, v1.35, and v1.36"."""
    assert [kubeadm_pins(m).etcd for m in (34, 35, 36)] == ["3.6.10-0"] * 3


def test_plan_shows_the_published_end_of_life_and_containerds_own_floors() -> None:
    """kubernetes.io publishes 1.36's and 1.37's end of life (2027-06-28, 2027-10-28); containerd's
    RELEASES.md "Kubernetes Support" gives the floors per minor, per containerd line."""
    from components.k8s.version_policy import summary

    on = date(2026, 11, 27)
    assert summary("1.36.1", on)[0] == "Kubernetes 1.36: supported on 2026-11-27; end of life 2027-06-28"
    assert summary("1.37.1", on)[0] == "Kubernetes 1.37: supported on 2026-11-27; end of life 2027-10-28"
    assert "containerd 2.3.0+, 2.2.0+ (containerd RELEASES.md; template: 2.3 LTS)" in summary("1.36.1", on)[2]
    assert "containerd 2.2.0+, 2.1.5+, 1.7.28+ (containerd RELEASES.md;" in summary("1.35.0", on)[2]
    assert "containerd 2.1.3+, 2.0.6+, 1.7.28+, 1.6.39+ (containerd RELEASES.md;" in summary("1.34.2", on)[2]
    # No 1.37 row upstream yet: 1.36's, and the line says so.
    assert "containerd 2.3.0+, 2.2.0+ (containerd RELEASES.md, 1.36's row: none for 1.37 yet;" in summary("1.37.1", on)[2]


@pytest.mark.parametrize(
    ("containerd", "kubernetes", "refused"),
    [
        ("2.3.0", "1.36.1", None),
        ("2.2.0", "1.36.1", None),
        ("2.4.1", "1.36.1", None),  # a line newer than the row's
        ("2.1.9", "1.36.1", "on the 2.1 line, which containerd RELEASES.md does not recommend for Kubernetes 1.36"),
        ("1.7.30", "1.36.1", "on the 1.7 line"),
        ("2.1.4", "1.35.0", "containerd 2.1.4 is older than 2.1.5, the oldest 2.1 patch"),
        ("1.7.28", "1.35.0", None),
        ("2.0.6", "1.35.0", "on the 2.0 line"),
        ("1.7.27", "1.34.2", "older than 1.7.28"),
        ("2.0.6", "1.34.2", None),
        ("2.2.0", "1.37.1", None),
        ("2.1.5", "1.37.1", "1.36's row: none for 1.37 yet"),
    ],
)
def test_containerd_below_its_minors_floor_is_refused(containerd: str, kubernetes: str, refused: str | None) -> None:
    from components.k8s.version_policy import containerd_refusal

    found = containerd_refusal(containerd, kubernetes)
    if refused is None:
        assert found is None
    else:
        assert found is not None and refused in found, found
