"""Every test: its tier (tests/tiers.py), and the repository's own `Pulumi.*.yaml` are the user's,
not fixtures.

A test that opens one of them (in this process) fails unless it is marked `user_stacks`: a check
that holds for any valid stack file (validate, plan, policy, cross-stack collisions). Everything
else reads tests/fixtures/stacks (tests/stack_fixtures.py). The guard is a `sys.addaudithook`
on the interpreter's `open` event (PEP 578), so a read through any library is seen too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from pathlib import Path

import pytest

from tests.tiers import mark_tiers

ROOT = Path(__file__).resolve().parents[1]
USER_STACKS_MARK = "user_stacks"

_watching: list[bool] = []
_opened: list[str] = []


def _is_user_stack(path: object) -> bool:
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str) or "Pulumi." not in path or not path.endswith(".yaml"):
        return False
    name = os.path.basename(path)
    return name != "Pulumi.yaml" and os.path.dirname(os.path.abspath(path)) == str(ROOT)


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _watching and args and _is_user_stack(args[0]):
        _opened.append(str(args[0]))


sys.addaudithook(_audit)


def _refuse_user_stack_reads(item: pytest.Item) -> None:
    opened, _opened[:] = sorted(set(_opened)), []
    if opened and item.get_closest_marker(USER_STACKS_MARK) is None:
        pytest.fail(
            f"{item.nodeid} read the user's stack file(s) {', '.join(opened)}: tests read their own "
            "copies (tests/stack_fixtures.py); only a check that holds for any valid stack file is "
            f"marked `{USER_STACKS_MARK}`",
            pytrace=False,
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_tiers(config, items)


def _watched(item: pytest.Item) -> Generator[None, None, None]:
    """Around one phase of a test: what it opens is recorded, then judged (`_refuse_user_stack_reads`)."""
    _opened.clear()  # what an earlier test read before it failed is not this one's
    _watching.append(True)
    try:
        result = yield
    finally:
        _watching.pop()
    _refuse_user_stack_reads(item)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _watched(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _watched(item))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    # A module that reads a user's stack file when imported (a module-level constant).
    _opened.clear()
    _watching.append(True)
    try:
        report = yield
    finally:
        _watching.pop()
    opened, _opened[:] = sorted(set(_opened)), []
    if opened and isinstance(collector, pytest.Module):
        report.outcome = "failed"
        report.longrepr = (
            f"{collector.nodeid} reads the user's stack file(s) {', '.join(opened)} when imported: "
            "read the fixture copies (tests/stack_fixtures.py)"
        )
    return report


@pytest.fixture(scope="session")
def fixture_project() -> Path:
    """A project folder with the program's code and the fixture stacks as its `Pulumi.*.yaml`:
    run `python -m stacks ...` there (cwd) to have it read the fixtures, not the user's files.
    Tests must not change it (copy it, or `copy_fixture_stacks` into their own tmp_path)."""
    from tests.stack_fixtures import fixture_project_dir

    return fixture_project_dir()
