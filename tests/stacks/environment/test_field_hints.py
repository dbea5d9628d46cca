"""The fix a field error suggests is one the next run accepts (issue 55 item 6): a Kubernetes
version YAML read as a number is told to be written whole (1.MINOR.PATCH, quoted), not just
quoted; a vmnic field explains the name that was written (a Linux name, a VMkernel adapter, a
zero-padded vmnic), and ESXi's own names, vmnicN without leading zeros, are the only ones taken."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from stacks.environment.loader import ConfigView, InvalidEnvironment, load_environment

MakeView = Callable[..., ConfigView]


def _problems(view: ConfigView) -> list[str]:
    with pytest.raises(InvalidEnvironment) as raised:
        load_environment(view)
    return raised.value.problems


def _line(problems: list[str], key: str) -> str:
    [line] = [p for p in problems if p.split(": ", 1)[0].endswith(key)]
    return line


def _set_version(value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(env: dict[str, Any]) -> None:
        env["kubernetes"]["version"] = value

    return edit


@pytest.mark.parametrize(
    ("written", "read_as", "suggested"),
    [
        (1.36, "1.36", "1.36.0"),  # `version: 1.36`
        (1.3, "1.3", "1.30.0"),  # `version: 1.30`: YAML's float drops the zero
    ],
)
def test_a_version_read_as_a_number_is_told_the_whole_quoted_version(
    edited_view: MakeView, written: float, read_as: str, suggested: str
) -> None:
    line = _line(_problems(edited_view(_set_version(written))), ".kubernetes.version")
    assert f"number {read_as}" in line or f"unquoted {read_as} as a number" in line, line
    assert "1.MINOR.PATCH" in line
    [quoted] = re.findall(r'e\.g\. "([^"]+)"', line)
    assert quoted == suggested
    # The suggestion has the form the next run takes: no advice it refuses as a format ("1.36" alone).
    # (1.30 itself is past support: that is the next run's one remaining, different, message.)
    after = [p for p in _problems_or_none(edited_view(_set_version(quoted))) if ".kubernetes.version" in p]
    assert [p for p in after if "not supported" not in p] == []


def _problems_or_none(view: ConfigView) -> list[str]:
    try:
        load_environment(view)
    except InvalidEnvironment as invalid:
        return invalid.problems
    return []


def _set_vmnic(value: str) -> Callable[[dict[str, Any]], None]:
    def edit(env: dict[str, Any]) -> None:
        env["hosts"][0]["rdmaVmnics"] = [value]

    return edit


@pytest.mark.parametrize(
    ("written", "says", "never"),
    [
        ("eth4", ["Linux interface name", "vmnic4"], ["vmk"]),
        ("vmnic04", ["without leading zeros", "write vmnic4"], ["vmk"]),
        ("vmk1", ["VMkernel adapter", "vmnic4"], ["vmnic1"]),
    ],
)
def test_a_vmnic_field_explains_the_name_written(
    edited_view: MakeView, written: str, says: list[str], never: list[str]
) -> None:
    line = _line(_problems(edited_view(_set_vmnic(written))), ".rdmaVmnics[0]")
    for text in says:
        assert text in line, line
    for text in never:
        assert text not in line.split("; ", 1)[1], line


@pytest.mark.parametrize("name", ["vmnic0", "vmnic4", "vmnic10"])
def test_esxi_vmnic_names_are_taken(edited_view: MakeView, name: str) -> None:
    assert not [p for p in _problems_or_none(edited_view(_set_vmnic(name))) if "rdmaVmnics" in p]
