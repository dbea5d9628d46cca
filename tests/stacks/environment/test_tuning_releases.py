"""Kubeflow Trainer and Katib against the stack's Kubernetes (issue 51 item 8): what `validate`
says of the newest releases upstream has, on the shipped default 1.36.1 and on its neighbours.

Trainer 2.3.0 (kubeflow/trainer, 2026-08) is upstream's newest release: its e2e runs 1.32-1.35 and
it is built with Kubernetes 1.36's client libraries (release-2.3 go.mod: k8s.io/api v0.36.2), so on
1.36 it is accepted with a warning; nothing of it is built for or tested on 1.37. Katib 0.19.0
(kubeflow/katib, 2026-06) is upstream's newest: e2e 1.31-1.34, libraries 1.34 (go.mod: v0.34.0),
so it is refused past 1.34 and the message says that no Katib release runs there."""

from __future__ import annotations

from typing import Any

from stacks.environment.model import Environment
from stacks.environment.version_policy import version_warnings
from tests.stacks.environment.test_rules import _problems


def _tuning(dev_raw: dict[str, Any], version: str, *, katib: bool) -> Environment:
    dev_raw["kubernetes"]["version"] = version
    dev_raw["kubernetes"]["gpuNodeTaint"] = False
    dev_raw["tuning"] = {"enabled": True, "katib": {"enabled": katib, "dbStorageClass": "vsphere-csi"}}
    return Environment.model_validate(dev_raw)


def test_trainer_alone_validates_on_the_default_kubernetes_with_a_warning(dev_raw: dict[str, Any]) -> None:
    env = _tuning(dev_raw, "1.36.1", katib=False)
    assert [p for p in _problems(env) if p[0].startswith("tuning")] == []
    [warning] = [w for w in version_warnings(env) if w.startswith("tuning.trainer.version")]
    assert "Kubeflow Trainer 2.3.0 is tested upstream on Kubernetes 1.32-1.35" in warning
    assert "built with Kubernetes 1.36's client libraries" in warning


def test_katib_on_the_default_kubernetes_names_the_newest_release_and_where_it_runs(dev_raw: dict[str, Any]) -> None:
    env = _tuning(dev_raw, "1.36.1", katib=True)
    [(path, message)] = [p for p in _problems(env) if p[0].startswith("tuning")]
    assert path == "tuning.katib.version"
    assert "Katib 0.19.0, the newest Katib release (kubeflow/katib v0.19.0), is tested upstream on" in message
    assert "Kubernetes 1.31-1.34" in message and "no Katib release is known to run on 1.36" in message
    assert "set tuning.katib.enabled false (Kubeflow Trainer alone runs on 1.36)" in message


def test_trainer_on_1_37_is_refused_naming_the_newest_release(dev_raw: dict[str, Any]) -> None:
    env = _tuning(dev_raw, "1.37.1", katib=False)
    [(path, message)] = [p for p in _problems(env) if p[0].startswith("tuning")]
    assert path == "tuning.trainer.version"
    assert "Kubeflow Trainer 2.3.0, the newest Kubeflow Trainer release (kubeflow/trainer v2.3.0)" in message
    assert "runs on Kubernetes 1.32-1.36" in message and "no Kubeflow Trainer release is known to run on 1.37" in message


def test_both_on_a_tested_minor_pass_without_a_warning(dev_raw: dict[str, Any]) -> None:
    env = _tuning(dev_raw, "1.34.2", katib=True)
    assert [p for p in _problems(env) if p[0].startswith("tuning")] == []
    assert not [w for w in version_warnings(env) if w.startswith("tuning")]
