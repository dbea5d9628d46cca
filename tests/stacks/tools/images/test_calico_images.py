"""Issue 41 item 7: the images Calico's operator deploys, per Calico release a stack may choose.

The list was written for v3.31.3 and applied to every release; each release that `validate`
accepts (one with a recorded checksum in manifests/index.json) must have its own list, and
`stacks images` refuses a release without one instead of listing another release's names.
"""

from __future__ import annotations

import pytest

from components.k8s.vendored import CALICO_OPERATOR, pinned_releases
from stacks.environment.loader import InvalidEnvironment
from stacks.tools.images import inventory


def test_every_calico_release_a_stack_may_choose_has_its_operator_images() -> None:
    managed = inventory.CALICO_OPERATOR_MANAGED
    for release in pinned_releases(CALICO_OPERATOR):
        assert isinstance(managed, dict) and release in managed, f"{release}: no operator image list recorded"
        assert "node" in managed[release] and "typha" in managed[release]


def test_a_release_without_a_list_is_refused_naming_the_key() -> None:
    with pytest.raises(InvalidEnvironment) as refused:
        inventory.calico_operator_managed("v3.29.9")
    assert "kubernetes.cni.version: Calico v3.29.9's operator images are not recorded" in str(refused.value)
