"""`validate`'s lines say the fix a person needs (issue 45): the unit of a size key, a list
written as a string, and a node by its name rather than its place in the list."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stacks.environment.loader import ENVIRONMENT_KEY, ConfigView, InvalidEnvironment, load_environment
from tests.stack_fixtures import fixture_view

E = ENVIRONMENT_KEY


def _problems(edit: Any) -> list[str]:
    view = fixture_view("dev")
    values = copy.deepcopy(dict(view.values))
    edit(values[E])
    with pytest.raises(InvalidEnvironment) as raised:
        load_environment(ConfigView(values=values, secret_keys=view.secret_keys))
    return raised.value.problems


@pytest.mark.parametrize(
    ("value", "fix"),
    [
        ("24GB", "write memoryMb: 24576"),
        ("24 GiB", "write memoryMb: 24576"),
        ("24576MB", "write memoryMb: 24576"),
        ("lots", "memoryMb is a plain number of MiB"),
    ],
)
def test_a_size_with_a_unit_names_the_keys_unit_and_the_number(value: str, fix: str) -> None:
    [line] = _problems(lambda env: env["gpuWorkers"].update(memoryMb=value))
    assert line.startswith(f"{E}.gpuWorkers.memoryMb: ")
    assert "memoryMb is a plain number of MiB (the unit is in the key's name)" in line
    assert fix in line


def test_a_disk_size_in_gigabytes_needs_no_conversion() -> None:
    [line] = _problems(lambda env: env["controlPlane"].update(diskGb="50G"))
    assert line.endswith("diskGb is a plain number of GiB (the unit is in the key's name): write diskGb: 50")


def test_a_list_written_as_a_string_is_shown_as_a_list() -> None:
    [line] = _problems(lambda env: env["gpuWorkers"].update(vgpuProfiles="grid_t4-16c"))
    assert line == (
        f"{E}.gpuWorkers.vgpuProfiles: Input should be a valid list (got 'grid_t4-16c'); "
        "write it as a YAML list, even of one item: [grid_t4-16c]"
    )


def test_a_node_is_named_by_its_name() -> None:
    def edit(env: dict[str, Any]) -> None:
        env["gpuWorkers"]["nodes"][1]["managementIp"] = "10.10.1.52"
        env["gpuWorkers"]["nodes"][3]["managementIp"] = env["gpuWorkers"]["nodes"][0]["managementIp"]

    problems = _problems(edit)
    assert problems == [
        f"{E}.gpuWorkers.nodes[worker-2].managementIp: 10.10.1.52 is not a host address of managementNetwork.subnet "
        "10.10.0.0/24; pick one inside it",
        f"{E}.gpuWorkers.nodes[worker-4].managementIp: 10.10.0.51 is already used by "
        "gpuWorkers.nodes[worker-1].managementIp; addresses must be unique",
    ]


def test_a_node_whose_name_is_unusable_keeps_its_index() -> None:
    def edit(env: dict[str, Any]) -> None:
        env["gpuWorkers"]["nodes"][0]["name"] = "Worker-1"

    [line] = _problems(edit)
    assert line.startswith(f"{E}.gpuWorkers.nodes[0].name: ")
