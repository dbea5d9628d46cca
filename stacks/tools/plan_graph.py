"""`plan --graph FILE`: the components a user recognises and which waits on which, as DOT, SVG or PNG.

Every resource is folded into the nearest of our own components (`gpucluster:*`: RdmaFabric,
NodePool, ClusterBootstrap, ...), so a ConfigGroup's dependency on the MPI Operator shows as
"TrainingJobs waits for MpiOperator", not as an edge between two anonymous groups. Resources outside
any of our components (the VM folder) stay nodes of their own. The output is deterministic: nodes
and edges are sorted by URN, so two plans of one stack draw the same file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from stacks.tools.mock_runtime import RecordedResource
from stacks.tools.plan_errors import GraphRefused

OUR_COMPONENTS = "gpucluster:"
"""Type-token prefix of the components this project defines (STYLE.md: `gpucluster:<module>:<Type>`)."""

FORMATS = {".dot": None, ".svg": "svg", ".png": "png"}
"""File suffix -> Graphviz output format (`None`: the DOT text itself)."""

_STACK = "pulumi:pulumi:Stack"


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


def component_graph(resources: list[RecordedResource]) -> str:
    """The DOT text: one box per component, an arrow from each component to what it waits for."""
    by_urn = {r.urn: r for r in resources}

    def owner_of(resource: RecordedResource) -> RecordedResource:
        """The nearest of our components holding `resource`, else its top-most ancestor below the stack."""
        current = resource
        while not current.type.startswith(OUR_COMPONENTS):
            parent = by_urn.get(current.parent or "")
            if parent is None or parent.type == _STACK:
                break
            current = parent
        return current

    nodes: dict[str, RecordedResource] = {}
    edges: set[tuple[str, str]] = set()
    for resource in resources:
        if resource.type == _STACK:
            continue
        owner = owner_of(resource)
        nodes[owner.urn] = owner
        for dependency in resource.dependencies:
            if dependency in by_urn and by_urn[dependency].type != _STACK:
                target = owner_of(by_urn[dependency])
                if target.urn != owner.urn:
                    edges.add((owner.urn, target.urn))
    ordered = sorted(nodes)
    ids = {urn: f"n{i}" for i, urn in enumerate(ordered)}
    lines = [
        "digraph plan {",
        "  rankdir=LR;",
        '  node [shape=box, style=rounded, fontname="Helvetica"];',
        '  edge [fontname="Helvetica"];',
        "  subgraph cluster_legend {",
        '    label="Legend"; fontname="Helvetica"; style=dashed;',
        '    legend_a [label="A", shape=box, style=rounded];',
        '    legend_b [label="B", shape=box, style=rounded];',
        '    legend_a -> legend_b [label="A waits for B"];',
        "  }",
    ]
    for urn in ordered:
        node = nodes[urn]
        label = f"{node.name}\\n{node.type.split(':')[-1]}"
        lines.append(f'  {ids[urn]} [label="{label}"];')
    for source_urn, target_urn in sorted(edges):
        lines.append(f"  {ids[source_urn]} -> {ids[target_urn]};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_graph(resources: list[RecordedResource], path: Path) -> None:
    """Write the picture in the format the file name asks for (see `graph_problem`)."""
    problem = graph_problem(path)
    if problem is not None:
        raise GraphRefused(problem)
    dot = component_graph(resources)
    path.parent.mkdir(parents=True, exist_ok=True)
    output_format = FORMATS[path.suffix]
    if output_format is None:
        path.write_text(dot)
        return
    drawn = subprocess.run(["dot", f"-T{output_format}"], input=dot.encode(), capture_output=True, check=False)
    if drawn.returncode != 0:
        raise GraphRefused(f"--graph {path}: Graphviz failed: {drawn.stderr.decode(errors='replace').strip()}")
    path.write_bytes(drawn.stdout)
