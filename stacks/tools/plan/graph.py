"""`plan --graph FILE`: the picture of `graph_model`'s boxes and arrows, as DOT, SVG or PNG.

Left to right in deployment order (an arrow from what is created first to what waits for it), the
critical path in bold red. The output is deterministic: boxes and arrows are sorted by URN, so two
plans of one stack draw the same file.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from stacks.tools.plan.errors import GraphRefused
from stacks.tools.plan.graph_model import build
from stacks.tools.plan.mock_runtime import RecordedResource

FORMATS = {".dot": None, ".svg": "svg", ".png": "png"}
"""File suffix -> Graphviz output format (`None`: the DOT text itself)."""

_CRITICAL = 'color="#c0392b", fontcolor="#c0392b", penwidth=3'
"""The critical path's boxes and arrows: bold and red."""


def graph_problem(path: Path) -> str | None:
    """Why `path` cannot be drawn, or None; checked before the plan runs, so nothing is wasted."""
    if path.suffix not in FORMATS:
        return f"--graph {path}: cannot draw a '{path.suffix or 'suffix-less'}' file; name it FILE.dot, FILE.svg or FILE.png"
    if FORMATS[path.suffix] is not None and shutil.which("dot") is None:
        return (
            f"--graph {path}: drawing {path.suffix[1:].upper()} needs Graphviz's `dot` "
            "(apt-get install graphviz); or ask for a .dot file"
        )
    if path.exists() and path.is_dir():
        return f"--graph {path}: is a folder; give a file name such as {path / 'plan.svg'}"
    return None


def component_graph(
    resources: Sequence[RecordedResource], critical_path: Sequence[str] = (), *, detail: bool = False
) -> str:
    """The DOT text: one box per component (per-node plumbing folded unless `detail`), arrows in
    deployment order, the critical path (the deployment model's URNs) in bold red."""
    graph = build(resources, critical_path, detail=detail)
    ids = {box.urn: f"n{i}" for i, box in enumerate(graph.boxes)}
    lines = [
        "digraph plan {",
        "  rankdir=LR;",
        '  node [shape=box, style=rounded, fontname="Helvetica"];',
        '  edge [fontname="Helvetica", color="#555555"];',
        "  subgraph cluster_legend {",
        '    label="Legend"; fontname="Helvetica"; style=dashed;',
        '    legend_a [label="A", shape=box, style=rounded];',
        '    legend_b [label="B", shape=box, style=rounded];',
        '    legend_c [label="C", shape=box, style=rounded];',
        '    legend_a -> legend_b [label="B waits for A"];',
        f'    legend_b -> legend_c [label="critical path", {_CRITICAL}];',
        "  }",
    ]
    for box in graph.boxes:
        lines.append(f'  {ids[box.urn]} [label="{box.label()}"' + (f", {_CRITICAL}" if box.critical else "") + "];")
    for arrow in graph.arrows:
        style = []
        if arrow.critical:
            style.append(_CRITICAL)
        if arrow.queued:
            style.append('style=dashed, label="queued for capacity"')
        lines.append(f"  {ids[arrow.before]} -> {ids[arrow.after]}" + (f" [{', '.join(style)}]" if style else "") + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_graph(
    resources: Sequence[RecordedResource], path: Path, critical_path: Sequence[str] = (), *, detail: bool = False
) -> None:
    """Write the picture in the format the file name asks for (see `graph_problem`)."""
    problem = graph_problem(path)
    if problem is not None:
        raise GraphRefused(problem)
    write_dot(component_graph(resources, critical_path, detail=detail), path)


def write_dot(dot: str, path: Path) -> None:
    """`dot` written in the format the file name asks for: the text itself, or Graphviz's drawing."""
    problem = graph_problem(path)
    if problem is not None:
        raise GraphRefused(problem)
    path.parent.mkdir(parents=True, exist_ok=True)
    output_format = FORMATS[path.suffix]
    if output_format is None:
        path.write_text(dot)
        return
    drawn = subprocess.run(["dot", f"-T{output_format}"], input=dot.encode(), capture_output=True, check=False)
    if drawn.returncode != 0:
        raise GraphRefused(f"--graph {path}: Graphviz failed: {drawn.stderr.decode(errors='replace').strip()}")
    path.write_bytes(drawn.stdout)
