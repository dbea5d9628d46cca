"""The README and docs/ say only what is true: every stack key and command-line flag they name exists.

A newcomer copies these names into a stack file or a shell; a key that the model does not know is
refused by `validate` (good) but sends them looking for a setting that is not there (bad).
"""

from __future__ import annotations

import argparse
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacks.cli import build_parser
from stacks.environment.model import Environment

PROJECT = Path(__file__).resolve().parents[2]
DOCS = [PROJECT / "README.md", *sorted((PROJECT / "docs").glob("*.md"))]
SCHEMA = Environment.model_json_schema(by_alias=True)
TOP_KEYS = set(SCHEMA["properties"])
# A dotted key path in backticks whose first part is a top-level environment key: `jobs.transport`,
# `gpuWorkers.nodes[].host`, `kubernetes.cni.version`. An optional `vsphere-gpu-cluster:environment.` prefix.
KEY_PATH = re.compile(
    r"`(?:vsphere-gpu-cluster:environment\.)?([a-z][A-Za-z0-9]*(?:\.[A-Za-z0-9]+|\[[^\]`]*\])+)(?:[:= ][^`]*)?`"
)
COMMAND = re.compile(r"python -m stacks (\w[\w-]*)((?: [^\n|`#]*)?)")


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
    for combinator in ("anyOf", "oneOf", "allOf"):
        for option in node.get(combinator, []):
            resolved = _resolve(option)
            if resolved.get("type") != "null":
                return resolved
    return node


def _key_exists(path: str) -> bool:
    node: dict[str, Any] = SCHEMA
    for part in re.findall(r"[A-Za-z0-9]+|\[[^\]]*\]", path):
        node = _resolve(node)
        if part.startswith("["):
            if node.get("type") != "array":
                return False
            node = node["items"]
            continue
        if node.get("type") == "array":
            node = _resolve(node["items"])
        properties = node.get("properties")
        if properties is None:
            additional = node.get("additionalProperties")
            if isinstance(additional, dict):  # a mapping: any key, e.g. jobs.extraEnv.NCCL_DEBUG
                node = additional
                continue
            return False
        if part not in properties:
            return False
        node = properties[part]
    return True


def _named_key_paths() -> Iterator[tuple[str, str]]:
    for doc in DOCS:
        for match in KEY_PATH.finditer(doc.read_text()):
            path = match.group(1)
            if path.split(".", 1)[0].split("[", 1)[0] in TOP_KEYS:
                yield doc.relative_to(PROJECT).as_posix(), path


YAML_BLOCK = re.compile(r"^([ \t]*)```ya?ml\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)
ENVIRONMENT_KEY = "vsphere-gpu-cluster:environment"


def _leaf_paths(value: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            yield from _leaf_paths(child, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        for item in value:
            yield from _leaf_paths(item, f"{prefix}[]")
    else:
        yield prefix


def _yaml_key_paths() -> Iterator[tuple[str, str]]:
    """Key paths of every stack-file snippet (a YAML block under `vsphere-gpu-cluster:environment`)."""
    for doc in DOCS:
        for match in YAML_BLOCK.finditer(doc.read_text()):
            indent = len(match.group(1))
            text = "\n".join(line[indent:] for line in match.group(2).splitlines())
            snippet = yaml.safe_load(text)
            if isinstance(snippet, dict) and "config" in snippet:
                snippet = snippet["config"]
            if isinstance(snippet, dict) and isinstance(snippet.get(ENVIRONMENT_KEY), dict):
                for path in _leaf_paths(snippet[ENVIRONMENT_KEY]):
                    yield (doc.relative_to(PROJECT).as_posix() if doc.is_relative_to(PROJECT) else str(doc)), path


def test_every_key_of_a_stack_file_snippet_exists() -> None:
    unknown = [f"{doc}: `{path}`" for doc, path in sorted(set(_yaml_key_paths())) if not _key_exists(path)]
    assert unknown == [], "stack-file snippets with keys the model does not have: " + ", ".join(unknown)


def test_the_snippet_check_reads_what_a_doc_writes(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "1. Set it:\n   ```yaml\n   vsphere-gpu-cluster:environment:\n     jobs:\n       sample:\n         transport: tcp\n   ```\n"
    )
    DOCS.append(doc)
    try:
        assert ("doc.md", "jobs.sample.transport") in {(Path(d).name, p) for d, p in _yaml_key_paths()}
    finally:
        DOCS.remove(doc)
    assert not _key_exists("jobs.sample.transport") and _key_exists("jobs.transport")


def test_docs_name_stack_keys_at_all() -> None:
    assert len(list(_named_key_paths())) > 20  # the pattern still finds what the docs write


@pytest.mark.parametrize(("doc", "path"), sorted(set(_named_key_paths())))
def test_every_stack_key_the_docs_name_exists(doc: str, path: str) -> None:
    assert _key_exists(path), f"{doc} names `{path}`, which no stack file can set"


def _options_by_command() -> dict[str, set[str]]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: _options(sub) for name, sub in commands.choices.items()}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """A command's flags, with those of its own subcommands (`bundle fetch --out`)."""
    found = {option for action in parser._actions for option in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
    return found


def _commands_in_docs() -> Iterator[tuple[str, str, str]]:
    for doc in DOCS:
        for match in COMMAND.finditer(doc.read_text()):
            yield doc.relative_to(PROJECT).as_posix(), match.group(1), match.group(2)


@pytest.mark.parametrize(("doc", "command", "rest"), sorted(set(_commands_in_docs())))
def test_every_command_and_flag_the_docs_name_exists(doc: str, command: str, rest: str) -> None:
    options = _options_by_command()
    assert command in options, f"{doc}: `python -m stacks {command}` is not a command"
    for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest):
        assert flag in options[command], f"{doc}: `python -m stacks {command}` has no {flag}"


def test_the_deploy_block_creates_the_policy_packs_virtualenv() -> None:
    pack = yaml.safe_load((PROJECT / "policy" / "PulumiPolicy.yaml").read_text())
    venv = pack["runtime"]["options"]["virtualenv"]
    guide = (PROJECT / "docs" / "deploy.md").read_text()  # the README's long sections moved to docs/ (issue 25)
    deploy = guide[: guide.index("```", guide.index("```bash") + 7)]
    assert f"python3 -m venv policy/{venv} && policy/{venv}/bin/pip install -r policy/requirements.txt" in deploy
    assert deploy.index(f"policy/{venv}") < deploy.index("--policy-pack policy")


# A relative link `[text](path)` or `[text](path#anchor)`; absolute URLs are not checked (no network).
LINK = re.compile(r"\]\((?!https?://|mailto:)([^)#\s]*)(?:#([^)\s]+))?\)")


def _anchor(heading: str) -> str:
    """GitHub's heading anchor: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _links() -> Iterator[tuple[Path, str, str | None]]:
    for doc in [*DOCS, *sorted((PROJECT / "docs").glob("*/*.md"))]:
        text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.DOTALL)
        for match in LINK.finditer(text):
            yield doc, match.group(1), match.group(2)


def test_the_docs_link_only_to_what_exists() -> None:
    broken = []
    for doc, target, anchor in _links():
        path = (doc.parent / target).resolve() if target else doc
        if not path.exists():
            broken.append(f"{doc.relative_to(PROJECT)}: ({target}) does not exist")
        elif anchor and path.suffix == ".md":
            anchors = {_anchor(h) for h in re.findall(r"^#+ (.+)$", path.read_text(), re.MULTILINE)}
            if anchor not in anchors:
                broken.append(
                    f"{doc.relative_to(PROJECT)}: ({target}#{anchor}) names no heading of {target or 'itself'}"
                )
    assert broken == []
    assert len(list(_links())) > 30  # the pattern still finds the links


OUTSIDE = re.compile(r"(?<![\w/.])(\.\./)+(shared|notes|main|wt)\b[^\s`)]*")
"""A path that climbs out of the repository (`../shared/...`): a reader of a clone has no such file."""


def test_the_docs_cite_no_file_outside_the_repository() -> None:
    found = [
        f"{doc.relative_to(PROJECT)}:{number}: {match.group(0)}"
        for doc in [*DOCS, *sorted((PROJECT / "docs").glob("*/*.md"))]
        for number, line in enumerate(doc.read_text().splitlines(), start=1)
        for match in OUTSIDE.finditer(line)
    ]
    assert found == []
    for doc, target, _ in _links():
        if target:
            assert (doc.parent / target).resolve().is_relative_to(PROJECT), f"{doc}: ({target}) is outside"


def test_the_readme_stays_one_screen_and_indexes_docs() -> None:
    readme = (PROJECT / "README.md").read_text()
    assert len(readme.splitlines()) <= 60, "the README is the quick start; long sections belong in docs/"
    index = (PROJECT / "docs" / "README.md").read_text()
    unlisted = [
        p.name for p in sorted((PROJECT / "docs").glob("*.md")) if p.name != "README.md" and f"]({p.name})" not in index
    ]
    assert unlisted == [], f"docs/README.md does not list {unlisted}"


def test_the_list_of_doubles_names_every_double_the_tests_use() -> None:
    """docs/tests.md's table of doubles must name each file that stands in for a real program: the
    fakes, doubles and stand-ins under tests/ (by their names), and the replays and mocks the
    suite is built on."""
    doc = (PROJECT / "docs" / "tests.md").read_text()
    table = doc.split("Doubles that remain", 1)[1]
    named = {
        path.relative_to(PROJECT).as_posix()
        for pattern in ("tests/**/*double*.py", "tests/**/fake_*.py", "tests/**/standin*/*")
        for path in PROJECT.glob(pattern)
        if path.is_file() and "__pycache__" not in path.parts
    }
    named |= {"stacks/tools/plan/mock_runtime.py", "tests/components/vsphere/terraform_vm.py"}
    missing = sorted(path for path in named if path not in table)
    assert not missing, f"docs/tests.md does not list these doubles: {missing}"
    readme = (PROJECT / "README.md").read_text()
    for kind in ("kube-apiserver", "kubectl and ssh", "nvidia-ctk", "Pulumi CLI", "fake hosts"):
        assert kind in readme, f"README's testing paragraph does not name the {kind} double"


def test_every_documented_kubeconfig_write_is_private_and_outside_the_repository() -> None:
    """Issue 53 item 10: the admin kubeconfig was written with the default umask (0644) into the
    repository's working tree, where nothing ignored it."""
    from stacks.kubectl import kubeconfig_command

    writes = []
    for path in DOCS:
        writes += [(path.name, line) for line in path.read_text().splitlines() if "stack output kubeconfig" in line]
    writes.append(("stacks/kubectl.py", kubeconfig_command("lab")))
    assert writes
    for where, line in writes:
        if ">" not in line:
            continue  # prose naming the output, not a command writing it
        assert "umask 077" in line.split(">")[0], (where, line)
        target = line.split(">", 1)[1].strip().rstrip(")`").split()[0]
        assert target.startswith("~/"), (where, line)
    for name in ("kubeconfig", "lab.kubeconfig"):
        ignored = subprocess.run(["git", "-C", str(PROJECT), "check-ignore", "-q", name], check=False)
        assert ignored.returncode == 0, f".gitignore must ignore {name} written in the checkout"
