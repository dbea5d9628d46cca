"""The plugin process (one per test module), configured for the vCenter simulator of
tests/components/vsphere/conftest.py, whose fixtures these tests share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.components.vsphere.conftest import extended, find, host_name, si, vcsim  # noqa: F401  (shared fixtures)
from tests.provider.plugin_process import Plugin, configure, running_plugin, vcsim_connection


@pytest.fixture(scope="module")
def plugin() -> Iterator[Plugin]:
    with running_plugin() as started:
        yield started


@pytest.fixture(scope="module")
def vsphere_plugin(plugin: Plugin, vcsim: Any) -> Plugin:  # noqa: F811  (the shared fixture)
    """The plugin configured as the program's provider resource configures it, password secret."""
    answer = configure(plugin.stub, vcsim_connection(vcsim.port, vcsim.user, vcsim.password), secret={"password"})
    assert answer.acceptSecrets and not answer.supportsPreview
    return plugin
