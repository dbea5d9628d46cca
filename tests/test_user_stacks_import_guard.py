"""tests/conftest.py's guard at import time (issue 51 item 9): a test module that reads one of the
user's `Pulumi.*.yaml` when imported (a module-level constant) fails its collection.

tests/test_user_stacks.py shows the run-time guard in a child pytest; nothing held the import-time
one, so it could be switched off unnoticed. Here the real hook (`pytest_make_collect_report`)
wraps a real module's collection during which the interpreter's `open` audit event names a user's
stack file (PEP 578: raised before the file is opened, so a name that does not exist is enough and
nothing of the user's is read)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests import conftest


def _collect(request: pytest.FixtureRequest, tmp_path: Path, *, opens: Path) -> pytest.CollectReport:
    module_file = tmp_path / "test_reads_at_import.py"
    module_file.write_text("")
    module = pytest.Module.from_parent(request.session, path=module_file)
    hook = conftest.pytest_make_collect_report(module)
    next(hook)  # the guard watches while the module is collected (imported)
    with contextlib.suppress(OSError):
        open(opens).close()  # what a module-level `read_text()` of the file does first
    report = pytest.CollectReport(module.nodeid, "passed", None, [])
    with pytest.raises(StopIteration) as done:
        hook.send(report)
    collected: pytest.CollectReport = done.value.value
    return collected


def test_a_module_that_reads_a_user_stack_when_imported_fails_its_collection(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    report = _collect(request, tmp_path, opens=conftest.ROOT / "Pulumi.import-guard-probe.yaml")
    assert report.outcome == "failed"
    assert "reads the user's stack file(s)" in str(report.longrepr) and "when imported" in str(report.longrepr)
    assert "Pulumi.import-guard-probe.yaml" in str(report.longrepr)


def test_a_module_that_reads_a_fixture_stack_when_imported_is_collected(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    fixture = conftest.ROOT / "tests" / "fixtures" / "stacks" / "Pulumi.import-guard-probe.yaml"
    assert _collect(request, tmp_path, opens=fixture).outcome == "passed"
