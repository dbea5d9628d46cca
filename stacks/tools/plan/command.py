"""`python -m stacks plan`: what a stack would register, without the Pulumi CLI or vCenter.

Runs the project's real `__main__.py` under the SDK's mock runtime and writes:
- `resources.json`: every resource with type, parent, dependencies and inputs, secrets redacted;
- `manifests/`: every Kubernetes object the stack would apply, as YAML;
- optionally a DOT, SVG or PNG picture of the components and their dependencies (`plan_graph`).
It never replaces `pulumi preview`, which diffs against real state.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from stacks import PROJECT_DIR
from stacks.environment.loader import PROJECT, ConfigView, config_for_runtime, load_environment
from stacks.tools.plan.deploy_time.durations import Durations
from stacks.tools.plan.deploy_time.engine import SHIPPED, EngineSettings
from stacks.tools.plan.deploy_time.estimate import Estimate, estimate
from stacks.tools.plan.errors import GraphRefused, ManifestFolderRefused
from stacks.tools.plan.estate_picture import estate_dot
from stacks.tools.plan.graph import graph_problem, write_dot, write_graph
from stacks.tools.plan.mock_runtime import (
    ProgramRun,
    RecordedResource,
    redact,
    run_program,
    run_project_main,
)

SECRET_PLACEHOLDER = "plan-placeholder-for-an-unreadable-secret"
"""The value secret config keys take in a plan: `secure:` values cannot be decrypted offline."""

_YamlDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

# Resources whose inputs carry Kubernetes objects, and where they keep them.
_CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"


@dataclass(frozen=True)
class PlanResult:
    run: ProgramRun
    manifest_files: list[Path]
    timing: Estimate
    """The deployment-time model over this plan (its critical path is the picture's too)."""


def plan_stack(
    view: ConfigView,
    *,
    stack: str,
    out_dir: Path,
    graph_file: Path | None = None,
    graph_detail: bool = False,
    graph_order: bool = False,
    durations: Durations | None = None,
    secret_placeholder: str = SECRET_PLACEHOLDER,
    engine: EngineSettings | None = SHIPPED,
) -> PlanResult:
    """Validate, run under mocks and write the plan. Raises `InvalidEnvironment` on bad input, and
    `GraphRefused`/`ManifestFolderRefused` for an output it cannot write, all before the program runs.
    `graph_file`: the estate picture (`estate_picture`); with `graph_order` the components in
    deployment order instead, with `graph_detail` also per-node plumbing as boxes of its own."""
    env = load_environment(view)  # every problem reported before anything runs
    refuse_unwritable_outputs(out_dir, graph_file)
    run = run_plan(view, stack=stack, secret_placeholder=secret_placeholder)
    manifests = write_plan(run, out_dir)
    timing = estimate(run.resources, durations, engine)
    if graph_file is not None and (graph_order or graph_detail):
        # The order graph draws deployment order: vCenter's path, whose links are dependencies or
        # vCenter's queue; the engine's queueing (threads, slots) links unrelated resources.
        path = (timing.vcenter or timing.pulumi_up).critical_path
        write_graph(run.resources, graph_file, path, detail=graph_detail)
    elif graph_file is not None:
        write_dot(estate_dot(env, run.resources, timing, stack), graph_file)
    return PlanResult(run=run, manifest_files=manifests, timing=timing)


def run_plan(view: ConfigView, *, stack: str, secret_placeholder: str = SECRET_PLACEHOLDER) -> ProgramRun:
    """The program under the mock runtime for an already validated stack file; writes nothing."""
    config, secret_keys = config_for_runtime(view, secret_placeholder)
    return run_program(
        run_project_main(PROJECT_DIR), project=PROJECT, stack=stack, config=config, secret_keys=secret_keys
    )


def refuse_unwritable_outputs(out_dir: Path, graph_file: Path | None) -> None:
    """What `plan` could only find out after running the program, found out before."""
    if graph_file is not None and (problem := graph_problem(graph_file)) is not None:
        raise GraphRefused(problem)
    if out_dir.exists() and not out_dir.is_dir():
        raise ManifestFolderRefused(f"--out {out_dir}: is a file; give a folder for resources.json and manifests/")
    strangers = foreign_manifest_files(out_dir / "manifests")
    if strangers:
        names = ", ".join(sorted(path.name for path in strangers)[:5])
        raise ManifestFolderRefused(
            f"--out {out_dir}: {out_dir / 'manifests'} holds {len(strangers)} file(s) no plan wrote ({names}); "
            "plan replaces only the manifests it wrote there: pick an empty or earlier plan's folder"
        )


def write_plan(run: ProgramRun, out_dir: Path) -> list[Path]:
    """`resources.json` and `manifests/` under `out_dir`; returns the manifest files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # Sorted keys and resources (below): registration order varies from run to run, and a
    # reviewer diffs two plans.
    (out_dir / "resources.json").write_text(json.dumps(resources_document(run), indent=2, sort_keys=True) + "\n")
    return write_manifests(run.resources, out_dir / "manifests")


def resources_document(
    run: ProgramRun, inputs_of: Callable[[RecordedResource], dict[str, Any]] = RecordedResource.redacted_inputs
) -> dict[str, Any]:
    """What `resources.json` holds; `inputs_of` picks each resource's inputs (redacted by default)."""
    return {
        "resources": [
            {
                "urn": r.urn,
                "type": r.type,
                "name": r.name,
                "parent": r.parent,
                "custom": r.custom,
                "protect": r.protect,
                "dependencies": r.dependencies,
                "inputs": _tidy_numbers(inputs_of(r)),
            }
            for r in sorted(run.resources, key=lambda r: r.urn)
        ],
        "outputs": _tidy_numbers(redact(run.stack_outputs)),
    }


def _tidy_numbers(value: Any) -> Any:
    """Pulumi's wire format has only floats; print 9000, not 9000.0."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _tidy_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tidy_numbers(v) for v in value]
    return value


def kubernetes_objects(resources: Iterable[RecordedResource]) -> list[tuple[RecordedResource, list[Any]]]:
    """Each ConfigGroup with the objects it applies, secrets redacted.

    The SDK marks a whole list secret when any element is, so a group holding a Secret object is
    written as one redacted entry; components keep Secrets in groups of their own for that reason.
    """
    found = []
    for resource in resources:
        if resource.type == _CONFIG_GROUP:
            objs = _tidy_numbers(redact(resource.inputs.get("objs", [])))
            found.append((resource, objs if isinstance(objs, list) else [objs]))
    return found


MANIFEST_INDEX = ".plan-manifests"
"""File in `OUT/manifests/` listing the manifests the last plan wrote: the only files a re-plan removes."""


def foreign_manifest_files(manifest_dir: Path) -> list[Path]:
    """Files in `manifest_dir` that no earlier plan wrote (a user's own, or another tool's)."""
    if not manifest_dir.is_dir():
        return []
    index = manifest_dir / MANIFEST_INDEX
    # A plan from before the index: its resources.json names the groups it wrote.
    owned = set(index.read_text().split()) if index.is_file() else _groups_in(manifest_dir.parent / "resources.json")
    return [path for path in manifest_dir.iterdir() if path.name != MANIFEST_INDEX and path.name not in owned]


def _groups_in(resources_json: Path) -> set[str]:
    try:
        document = json.loads(resources_json.read_text())
        return {f"{r['name']}.yaml" for r in document["resources"] if r["type"] == _CONFIG_GROUP}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def write_manifests(resources: Iterable[RecordedResource], manifest_dir: Path) -> list[Path]:
    """One YAML file per ConfigGroup; replaces what the previous plan wrote, and nothing else."""
    strangers = foreign_manifest_files(manifest_dir)
    if strangers:
        raise ManifestFolderRefused(f"{manifest_dir} holds files no plan wrote: {sorted(p.name for p in strangers)}")
    if manifest_dir.is_dir():
        for path in manifest_dir.iterdir():  # all of them the previous plan's (checked above)
            path.unlink()
    manifest_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for resource, objs in kubernetes_objects(resources):
        path = manifest_dir / f"{resource.name}.yaml"
        # Sorted keys: deterministic, and apiVersion/kind/metadata/spec still come first.
        path.write_text(yaml.dump_all(objs, Dumper=_YamlDumper, sort_keys=True))
        written.append(path)
    (manifest_dir / MANIFEST_INDEX).write_text("".join(f"{path.name}\n" for path in sorted(written)))
    return written


def summary_tree(run: ProgramRun) -> str:
    """Components as a tree with the count of each resource type under them."""
    children: dict[str | None, list[RecordedResource]] = {}
    for r in run.resources:
        children.setdefault(r.parent, []).append(r)
    known = {r.urn for r in run.resources}
    roots = [r for r in run.resources if r.parent not in known]
    lines: list[str] = []

    def walk(resource: RecordedResource, depth: int) -> None:
        kids = children.get(resource.urn, [])
        components = [k for k in kids if not k.custom]
        custom_counts = Counter(k.type for k in kids if k.custom)
        lines.append(f"{'  ' * depth}{resource.name} ({resource.type})")
        for type_token, count in sorted(custom_counts.items()):
            lines.append(f"{'  ' * (depth + 1)}{count} x {type_token}")
        for component in components:
            walk(component, depth + 1)

    loose = Counter(r.type for r in roots if r.custom)
    for root in roots:
        if not root.custom:
            walk(root, 0)
    for type_token, count in sorted(loose.items()):
        lines.append(f"{count} x {type_token}")
    counts = resource_counts(run)
    lines.append(
        f"total: {counts['total']} resources ({counts['custom']} custom resources + {counts['components']} components), "
        "what `--json` counts as `resources`; not counted: the stack itself and the Kubernetes objects inside "
        "ConfigGroups/ConfigFiles (the provider registers those at deploy time, and `pulumi preview` counts them)"
    )
    return "\n".join(lines)


def resource_counts(run: ProgramRun) -> dict[str, int]:
    """The one resource count `plan` prints and `--json` gives: every resource the program registers."""
    custom = sum(1 for r in run.resources if r.custom)
    return {"total": len(run.resources), "custom": custom, "components": len(run.resources) - custom}
