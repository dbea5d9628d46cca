"""Issue 37 item 5 in GPU Operator mode: the operator brings its own NVIDIA Container Toolkit, so a
chart before 25.3.1 (toolkit before 1.17.8: CVE-2025-23266; the CVE record lists "NVIDIA GPU
Operator All versions up to and including 25.3.0" as affected) is refused, naming the key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stacks.environment.loader import LICENSE_TOKEN_KEY, ConfigView, InvalidEnvironment, load_environment

MakeView = Callable[..., ConfigView]


def operator(chart: str) -> Callable[[dict[str, Any]], None]:
    def edit(env: dict[str, Any]) -> None:
        settings = {"driverRepository": "r.example.com/nvidia", "driverVersion": "570.1", "chartVersion": chart}
        env["gpu"] = {"mode": "gpu-operator", "gpuOperator": settings}

    return edit


@pytest.mark.parametrize("chart", ["v25.3.0", "v24.9.2", "v1.11.0"])
def test_a_gpu_operator_chart_with_a_vulnerable_toolkit_is_refused(edited_view: MakeView, chart: str) -> None:
    with pytest.raises(InvalidEnvironment) as raised:
        load_environment(edited_view(operator(chart), secrets=(LICENSE_TOKEN_KEY,)))
    [problem] = raised.value.problems
    assert problem.startswith("vsphere-gpu-cluster:environment.gpu.gpuOperator.chartVersion:"), problem
    assert "v25.3.1" in problem and "CVE-2025-23266" in problem


@pytest.mark.parametrize("chart", ["v25.3.1", "v25.10.0", "v26.7.0"])
def test_a_fixed_chart_is_accepted(edited_view: MakeView, chart: str) -> None:
    env = load_environment(edited_view(operator(chart), secrets=(LICENSE_TOKEN_KEY,)))
    assert env.gpu.gpu_operator is not None and env.gpu.gpu_operator.chart_version == chart
